// One pin request (contract: infra/temporal/contracts/pins.ts): queued → pinning → pinned, or
// failed with TIMEOUT when the content is not fetched by the request's deadline. The API pins
// content its Kubo has inline and starts this only for the rest (or when that did not finish:
// core/pins.ts). It recorded the request (its hold on the content) first; this dials
// the origins, asks Cluster to pin and watches Cluster until it reports the content pinned,
// recording each step in MongoDB.
//
// Content that is local by now takes one workflow task: the first step is a local activity
// that pins, waits briefly and, once pinned, marks the request so. Otherwise a heartbeating
// activity waits, up to the deadline, and marks it.
import { proxyActivities, proxyLocalActivities, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { pinWait, type PinResult, type PinWorkflow } from '../infra/temporal/contracts/pins.js';

/** Short steps run as local activities: no task queue round trip each. */
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1m',
  // MongoDB or Temporal may be down for a while; keep trying, slower and slower.
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '30s' },
});

export const pinWorkflow: PinWorkflow = async (input): Promise<PinResult> => {
  const ref = { key: input.key, requestId: input.requestId };
  const content = { ...ref, cid: input.cid, multihash: input.multihash, origins: input.origins };
  let outcome = await local.beginPin(content);

  if ('pinned' in outcome && !outcome.pinned) {
    // The wait may last until the deadline (24 h by default); see the contract's `pinWait`.
    const { awaitClusterPin } = proxyActivities<Pick<Activities, typeof pinWait.activity>>({
      taskQueue: pinWait.taskQueue(workflowInfo().taskQueue),
      startToCloseTimeout: Math.max(input.deadline - Date.now(), 0) + 60_000,
      heartbeatTimeout: pinWait.heartbeatTimeoutMs,
      retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
    });
    outcome = await awaitClusterPin({ ...content, deadline: input.deadline, requested: outcome.requested });
  }

  if ('gone' in outcome) return 'gone';
  if (outcome.pinned) {
    // Both steps mark the request pinned themselves (`completed`); a history recorded before
    // they did has its step's outcome without it, and replays this step as it ran.
    if (!outcome.completed) await local.completePin({ ...ref, cid: input.cid, multihash: input.multihash, size: outcome.size });
    return 'pinned';
  }
  await local.failPin({
    ...ref,
    multihash: input.multihash,
    cid: input.cid,
    error: { reason: 'TIMEOUT', details: `the content was not fetched in time (last cluster status: ${outcome.lastStatus})` },
  });
  return 'failed';
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// It lives until its content arrives, up to PIN_TIMEOUT (a day by default): pinned to the
// version that started it, it would keep that version's workers running as long.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, pinWorkflow);
