// The S3 multipart completion's steps (workflows/multipart.ts) and the cleanup of abandoned
// uploads: the same use-cases the S3 surface calls (core/s3/multipart.ts), run by the
// worker with its own components.
import { assembleUpload, cleanAbandonedUploads, commitUpload, dropCompletedParts } from '../core/s3/multipart.js';
import type { AssembledFile } from '../infra/ipfs/unixfs-file.js';
import type { ActivityDeps } from './deps.js';
import { heartbeating } from './heartbeat.js';

export function createMultipartActivities(deps: ActivityDeps) {
  return {
    /** Builds the object's DAG; null when the upload was completed already (a rerun). */
    // Every step heartbeats: a CompleteMultipartUpload waits for them, so a dead worker's step
    // is retried within seconds. (The fallback of assembly streams 5 GB through Kubo's add.)
    assembleMultipart: (uploadId: string): Promise<AssembledFile | null> =>
      heartbeating((ctx) => assembleUpload(deps, uploadId, ctx.cancellationSignal)),

    commitMultipart: (input: { uploadId: string; assembled: AssembledFile }) =>
      heartbeating(() => commitUpload(deps, input.uploadId, input.assembled)),

    dropMultipartParts: (uploadId: string) => heartbeating(() => dropCompletedParts(deps, uploadId)),

    cleanAbandonedMultipart: () => heartbeating(() => cleanAbandonedUploads(deps, deps.config.s3.multipartMaxAgeMs)),
  };
}
