// Makes IPFS Cluster match the holds on one piece of content (workflow ID `sync:<multihash>`).
//
// Why this shape: every change to a hold is an atomic MongoDB insert or delete followed by
// signal-with-start of this workflow. Only this workflow pins or unpins that content in
// Cluster, and Temporal runs at most one execution per workflow ID, so Cluster calls for a
// CID never race. Each round reads the holds fresh; a signal that arrives during a round
// forces another one, and a signal that arrives as the workflow completes makes Temporal
// refuse the completion and replay with it. So the last round always sees the last change:
// the content is never left unpinned while held, nor pinned with no holder.
import { continueAsNew, defineSignal, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

export const changedSignal = defineSignal('changed');

const { syncCid } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** Rounds before the history is cut short with continue-as-new. */
const MAX_ROUNDS = 100;

export async function syncCidWorkflow(input: { multihash: string; cid: string }): Promise<void> {
  let dirty = true;
  setHandler(changedSignal, () => {
    dirty = true;
  });
  for (let round = 1; dirty; round++) {
    dirty = false;
    await syncCid(input);
    if (round >= MAX_ROUNDS && dirty) await continueAsNew<typeof syncCidWorkflow>(input);
  }
}
