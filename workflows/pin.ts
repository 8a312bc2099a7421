// One pin request (workflow ID `pin:<cid>:<userId>`): queued → pinning → pinned, or failed
// with TIMEOUT when the content is not fetched by the request's deadline. The hold on the
// content was taken by the API when the request was made; the per-CID sync workflow asks
// Cluster to pin. This workflow dials the origins and watches Cluster until it reports the
// content pinned, recording each step in MongoDB.
import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

export interface PinInput {
  requestId: string;
  userId: string;
  cid: string;
  multihash: string;
  origins: string[];
  /** Epoch ms after which the pin ends `failed` with TIMEOUT. */
  deadline: number;
}

/** Short bookkeeping steps run as local activities: no task queue round trip each. */
const bookkeeping = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30s',
  // MongoDB or Temporal may be down for a while; keep trying, slower and slower.
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '30s' },
});

export async function pinWorkflow(input: PinInput): Promise<'pinned' | 'failed'> {
  await bookkeeping.setPinStatus({ requestId: input.requestId, status: 'pinning' });

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
  const outcome = await awaitClusterPin({ cid: input.cid, origins: input.origins, deadline: input.deadline });

  if (outcome.pinned) {
    await bookkeeping.completePin({ requestId: input.requestId, userId: input.userId, size: outcome.size });
    return 'pinned';
  }
  await bookkeeping.failPin({
    requestId: input.requestId,
    multihash: input.multihash,
    cid: input.cid,
    error: { reason: 'TIMEOUT', details: `the content was not fetched in time (last cluster status: ${outcome.lastStatus})` },
  });
  return 'failed';
}
