// Contract of the holds sync workflow (workflows/holds.ts): one execution per piece of
// content, `sync:<multihash>`, makes IPFS Cluster match who holds it. A change to a record that
// holds content is made good inline where Cluster is at hand, and otherwise, or when that
// fails, followed by `requestSync` (core/hold-sync.ts); activities/holds.ts says why that keeps
// Cluster right under any interleaving.
import type { JobContract, Jobs } from './job.js';

/** One record that holds content, by its kind and `_id` (infra/db/holds.ts lists the kinds). */
export interface HolderRef {
  kind: string;
  key: string;
  /** Whose record it is, when the change was its insert (core/hold-sync.ts `AddedHolder`):
   * carried along, unread by the workflow, which reads the record again anyway. */
  userId?: string;
}

export interface SyncInput {
  multihash: string;
  /** A CID of the content, for Cluster (any CID of that multihash). */
  cid: string;
  /** Work carried over by continue-as-new. */
  pending?: { full: boolean; added: HolderRef[] };
}

/** `added`: the change was this record's insert, so checking it alone is enough. Without it a
 * hold may have gone, and the workflow reads every holder. */
export interface SyncChange {
  added?: HolderRef;
}

export type SyncWorkflow = (input: SyncInput) => Promise<void>;

export const CHANGED_SIGNAL = 'changed';

export const syncJob: JobContract<SyncInput, { multihash: string }> = {
  workflowType: 'syncCidWorkflow',
  taskQueue: (base) => base,
  workflowId: ({ multihash }) => `sync:${multihash}`,
  searchAttributes: ({ cid }) => ({ Cid: cid }),
};

/** Tells the content's sync workflow that its holds changed, starting it if needed. */
export function requestSync(jobs: Jobs, multihash: string, cid: string, added?: HolderRef): Promise<void> {
  const change: SyncChange = added ? { added } : {};
  return jobs.signalWithStart(syncJob, { multihash, cid }, CHANGED_SIGNAL, [change]);
}
