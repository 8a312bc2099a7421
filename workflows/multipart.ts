// One S3 multipart completion (contract: infra/temporal/contracts/multipart.ts): assemble the
// object's DAG from its parts, record the object (the upload turns `completed`, which the
// waiting CompleteMultipartUpload answers from), wait until Cluster pins it, then drop the
// parts, whose leaves the object now links. Every step is idempotent, so a worker or API that
// dies anywhere resumes here and the object is recorded once.
import { proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { MultipartCleanupWorkflow, MultipartResult, MultipartWorkflow } from '../infra/temporal/contracts/multipart.js';

const retry = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' };
// Each step heartbeats (activities/heartbeat.ts): a worker that dies under one is noticed within
// the heartbeat timeout, and CompleteMultipartUpload, which waits for the steps, answers soon
// after a live worker retries it.
const { assembleMultipart } = proxyActivities<Activities>({ startToCloseTimeout: '2h', heartbeatTimeout: '10s', retry });
const { awaitSnapshotPinned } = proxyActivities<Activities>({ startToCloseTimeout: '24h', heartbeatTimeout: '30s', retry });
const { commitMultipart, dropMultipartParts, cleanAbandonedMultipart } = proxyActivities<Activities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '10s',
  retry,
});

export const multipartWorkflow: MultipartWorkflow = async ({ uploadId }): Promise<MultipartResult> => {
  const assembled = await assembleMultipart(uploadId);
  if (!assembled) {
    // Completed by an earlier run (only the parts may be left), or open again after its
    // condition failed (dropping then keeps the parts).
    await dropMultipartParts(uploadId);
    return { cid: '', etag: '', size: 0, checksums: {} };
  }
  const result = await commitMultipart({ uploadId, assembled });
  // The completion's condition did not hold: the upload is open again, with its parts.
  if (!result) return { cid: '', etag: '', size: 0, checksums: {} };
  // The parts keep the leaves from Kubo's garbage collector until the object's pin does.
  await awaitSnapshotPinned({ cid: result.cid });
  await dropMultipartParts(uploadId);
  return result;
};

export const multipartCleanupWorkflow: MultipartCleanupWorkflow = () => cleanAbandonedMultipart();

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// Minutes long, so it could be pinned; but a pinned workflow whose version has no worker
// left waits for one forever (npm start restarted on a new commit keeps no old worker), and its
// code is kept replay-safe like the rest.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, multipartWorkflow);
// A round from a schedule, on whatever code runs now: nothing to keep.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, multipartCleanupWorkflow);
