// The S3 multipart completion's steps (workflows/multipart.ts) and the cleanup of abandoned
// uploads: the same use-cases the S3 surface calls (api/usecases/s3/multipart.ts), run by the
// worker with its own components.
import { Context } from '@temporalio/activity';
import { assembleUpload, cleanAbandonedUploads, commitUpload, dropCompletedParts } from '../api/usecases/s3/multipart.js';
import type { AssembledFile } from '../infra/unixfs-file.js';
import type { ActivityDeps } from './deps.js';

export function createMultipartActivities(deps: ActivityDeps) {
  return {
    /** Builds the object's DAG; null when the upload was completed already (a rerun). */
    async assembleMultipart(uploadId: string): Promise<AssembledFile | null> {
      const ctx = Context.current();
      // The fast path takes seconds; the fallback streams the bytes through Kubo's add, which
      // may take minutes for 5 GB: heartbeats say the step is alive.
      const beat = setInterval(() => ctx.heartbeat(), 2_000);
      try {
        return await assembleUpload(deps, uploadId, ctx.cancellationSignal);
      } finally {
        clearInterval(beat);
      }
    },

    commitMultipart: (input: { uploadId: string; assembled: AssembledFile }) => commitUpload(deps, input.uploadId, input.assembled),

    dropMultipartParts: (uploadId: string) => dropCompletedParts(deps, uploadId),

    cleanAbandonedMultipart: () => cleanAbandonedUploads(deps, deps.config.s3.multipartMaxAgeMs),
  };
}
