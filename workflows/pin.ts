// One pin request (workflow ID `pin:<cid>:<userId>`): queued → pinning → pinned, or failed
// with TIMEOUT when the content is not fetched by the request's deadline. The API recorded
// the request (its hold on the content) before starting this workflow. This workflow dials
// the origins, asks Cluster to pin and watches Cluster until it reports the content pinned,
// recording each step in MongoDB.
//
// Content that is already local takes one workflow task: the first step is a local activity
// that pins and waits briefly. Otherwise a heartbeating activity waits, up to the deadline.
import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

export interface PinInput {
  /** The record's `_id` (`<userId>:<multihash>`). */
  key: string;
  requestId: string;
  userId: string;
  cid: string;
  multihash: string;
  origins: string[];
  /** Epoch ms after which the pin ends `failed` with TIMEOUT. */
  deadline: number;
}

/** Short steps run as local activities: no task queue round trip each. */
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1m',
  // MongoDB or Temporal may be down for a while; keep trying, slower and slower.
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '30s' },
});

export async function pinWorkflow(input: PinInput): Promise<'pinned' | 'failed' | 'gone'> {
  const ref = { key: input.key, requestId: input.requestId };
  let outcome = await local.beginPin({ ...ref, cid: input.cid, multihash: input.multihash, origins: input.origins });

  if ('pinned' in outcome && !outcome.pinned) {
    // The wait may last until the deadline (24 h by default). It heartbeats, so a worker that
    // dies mid-pin is noticed within the heartbeat timeout and the wait resumes elsewhere.
    // It runs on the `<queue>-waits` task queue, whose worker allows thousands at once: these
    // waits are mostly asleep and must not take the slots of short activities.
    const { awaitClusterPin } = proxyActivities<Activities>({
      taskQueue: `${workflowInfo().taskQueue}-waits`,
      startToCloseTimeout: Math.max(input.deadline - Date.now(), 0) + 60_000,
      heartbeatTimeout: '10s',
      retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
    });
    outcome = await awaitClusterPin({
      ...ref,
      cid: input.cid,
      multihash: input.multihash,
      origins: input.origins,
      deadline: input.deadline,
      requested: outcome.requested,
    });
  }

  if ('gone' in outcome) return 'gone';
  if (outcome.pinned) {
    await local.completePin({ ...ref, size: outcome.size });
    return 'pinned';
  }
  await local.failPin({
    ...ref,
    multihash: input.multihash,
    cid: input.cid,
    error: { reason: 'TIMEOUT', details: `the content was not fetched in time (last cluster status: ${outcome.lastStatus})` },
  });
  return 'failed';
}
