// One folder snapshot (contract: infra/temporal/contracts/snapshots.ts): build the UnixFS
// directory of the folder from its files' CIDs (the listing kept for the job then goes),
// record it (a hold, so Cluster pins it), and wait until Cluster has it. The `progress` query
// answers how many files are linked so far.
import {
  CancellationScope,
  defineQuery,
  defineSignal,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  LINKED_SIGNAL,
  PROGRESS_QUERY,
  type SnapshotProgress,
  type SnapshotResult,
  type SnapshotWorkflow,
} from '../infra/temporal/contracts/snapshots.js';

const progressQuery = defineQuery<SnapshotProgress>(PROGRESS_QUERY);
const linkedSignal = defineSignal<[SnapshotProgress]>(LINKED_SIGNAL);

const retry = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' };
/** Heartbeating steps: a worker that dies is noticed within 10 s and the step resumes elsewhere. */
const { buildSnapshot, awaitSnapshotPinned } = proxyActivities<Activities>({
  startToCloseTimeout: '2h',
  heartbeatTimeout: '10s',
  retry,
});
const { recordSnapshot, dropSnapshotListing, announceSnapshot } = proxyLocalActivities<Activities>({ startToCloseTimeout: '1m', retry });
/** Runs recorded before webhooks announce nothing when replayed (Temporal's patching). */
const WEBHOOK_EVENTS_PATCH = 'webhook-events';

export const snapshotWorkflow: SnapshotWorkflow = async (input): Promise<SnapshotResult> => {
  if (!patched(WEBHOOK_EVENTS_PATCH)) return takeSnapshot(input);
  let result: SnapshotResult;
  try {
    result = await takeSnapshot(input);
  } catch (err) {
    // Also when the job was cancelled (by an operator): the announcement itself is not.
    const error = (err as Error).message;
    await CancellationScope.nonCancellable(() => announceSnapshot({ ...input, status: 'failed', error }));
    throw err;
  }
  if (result.status === 'complete') await announceSnapshot({ ...input, ...result });
  return result;
};

async function takeSnapshot(input: Parameters<SnapshotWorkflow>[0]): Promise<SnapshotResult> {
  let progress: SnapshotProgress = { linked: 0, total: 0 };
  setHandler(progressQuery, () => progress);
  setHandler(linkedSignal, (reported) => {
    if (reported.linked >= progress.linked) progress = reported;
  });

  const built = await buildSnapshot(input);
  await dropSnapshotListing(input);
  if (built.changed) return { status: 'changed' };
  const takenAt = await recordSnapshot({
    ...input,
    cid: built.cid,
    fileCount: built.fileCount,
    totalSize: built.totalSize,
    takenAt: Date.now(),
  });
  await awaitSnapshotPinned({ cid: built.cid });
  return { status: 'complete', cid: built.cid, fileCount: built.fileCount, totalSize: built.totalSize, takenAt };
}

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// Minutes long, so it could be pinned; but a pinned workflow whose version has no worker
// left waits for one forever (npm start restarted on a new commit keeps no old worker), and its
// code is kept replay-safe like the rest.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, snapshotWorkflow);
