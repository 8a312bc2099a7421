// Makes IPFS Cluster match the holds on one piece of content (workflow ID `sync:<multihash>`).
//
// Why this shape: every change to a hold is an insert or delete (or status change) of a
// MongoDB record followed by signal-with-start of this workflow. Temporal runs at most one
// execution per workflow ID, so its rounds never overlap. A round reads the holds fresh; a
// signal that arrives during a round forces another one, and a signal that arrives as the
// workflow completes makes Temporal refuse the completion and replay with it. So the last
// round always sees the last change.
//
// Two kinds of round. A signal naming an added record (`added`) only needs that record
// checked by `_id` and the content pinned: pinning is right whenever anyone holds it. Any
// other signal may mean a hold has gone: the full round reads every holder, and unpins when
// there is none, then reads again and pins back if a hold arrived meanwhile. Pins made
// elsewhere (the pin workflow pins its content itself, then checks its request still exists)
// are therefore never undone for good: an unpin is always followed by a fresh read. See
// activities/holds.ts for the argument in full.
import { continueAsNew, defineSignal, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { HolderRef } from '../activities/holds.js';

export interface SyncChange {
  added?: HolderRef;
}

export const changedSignal = defineSignal<[SyncChange?]>('changed');

const { syncCid, pinHeld } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** Rounds before the history is cut short with continue-as-new. */
const MAX_ROUNDS = 100;

export interface SyncInput {
  multihash: string;
  cid: string;
  /** Work carried over by continue-as-new. */
  pending?: { full: boolean; added: HolderRef[] };
}

export async function syncCidWorkflow(input: SyncInput): Promise<void> {
  let full = input.pending?.full ?? false;
  const added: HolderRef[] = [...(input.pending?.added ?? [])];
  setHandler(changedSignal, (change) => {
    if (change?.added) added.push(change.added);
    else full = true;
  });
  const { multihash, cid } = input;
  for (let round = 1; full || added.length > 0; round++) {
    if (round > MAX_ROUNDS) await continueAsNew<typeof syncCidWorkflow>({ multihash, cid, pending: { full, added } });
    if (full) {
      // A full round also covers every record added so far.
      full = false;
      added.length = 0;
      await syncCid({ multihash, cid });
    } else {
      await pinHeld({ multihash, cid, refs: added.splice(0) });
    }
  }
}
