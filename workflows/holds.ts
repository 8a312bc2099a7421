// Makes IPFS Cluster match the holds on one piece of content (contract:
// infra/temporal/contracts/holds.ts, one execution per `sync:<multihash>`).
//
// Temporal runs at most one execution per workflow ID, so its rounds never overlap one another.
// A round reads the holds fresh; a signal that arrives during a round forces another one, and a
// signal that arrives as the workflow completes makes Temporal refuse the completion and replay
// with it, so the last round always sees the last change. A signal naming an added record only
// needs that record checked and the content pinned (or unpinned, if it is gone and nothing else
// holds it); any other signal gets a full round. The same rounds run inline in the process that
// made the change (core/hold-sync.ts), overlapping these; this workflow is where a change goes
// when that fails. Why all of them together are race-free: activities/holds.ts.
import { continueAsNew, defineSignal, proxyLocalActivities, setHandler, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { CHANGED_SIGNAL, type HolderRef, type SyncChange, type SyncWorkflow } from '../infra/temporal/contracts/holds.js';

const changedSignal = defineSignal<[SyncChange?]>(CHANGED_SIGNAL);

const { syncCid, pinHeld } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** Rounds before the history is cut short with continue-as-new. */
const MAX_ROUNDS = 100;

export const syncCidWorkflow: SyncWorkflow = async (input) => {
  let full = input.pending?.full ?? false;
  const added: HolderRef[] = [...(input.pending?.added ?? [])];
  setHandler(changedSignal, (change) => {
    if (change?.added) added.push(change.added);
    else full = true;
  });
  const { multihash, cid } = input;
  for (let round = 1; full || added.length > 0; round++) {
    if (round > MAX_ROUNDS) await continueAsNew<SyncWorkflow>({ multihash, cid, pending: { full, added } });
    if (full) {
      // A full round also covers every record added so far.
      full = false;
      added.length = 0;
      await syncCid({ multihash, cid });
    } else {
      await pinHeld({ multihash, cid, refs: added.splice(0) });
    }
  }
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// It lives as long as its content's holds keep changing (continuing as new every 100 rounds).
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, syncCidWorkflow);
