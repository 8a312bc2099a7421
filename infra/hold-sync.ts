// How every change of holds is announced: appended to the change log first, then signalled to
// the content's sync workflow (infra/temporal/contracts/holds.ts). The order is the point:
// a signal lost while Temporal is down leaves its log entry behind, and the next sweep round
// (activities/holds.ts) checks that content and asks for the sync the signal would have.
import type { Database } from './db/index.js';
import { requestSync, type HolderRef } from './temporal/contracts/holds.js';
import type { Jobs } from './temporal/jobs.js';

export async function announceHoldChange(
  deps: { db: Pick<Database, 'holdChanges'>; jobs: Jobs },
  multihash: string,
  cid: string,
  added?: HolderRef,
): Promise<void> {
  await deps.db.holdChanges.append(multihash, cid);
  await requestSync(deps.jobs, multihash, cid, added);
}

/**
 * For a holder kind with no origins (an IPNS name): announces the change only when it can
 * change Cluster's pin, that is when no other record holds the content. Called after the change
 * is written, so it is race-free by the order of writes and reads: of two records leaving the
 * same content at once, each removes itself before it looks, so the later look sees neither and
 * announces; a record added beside another one is seen by that one's later removal round,
 * which then keeps the pin. Saves a sync workflow round per publish where the old and new
 * targets are held otherwise (by their uploads), as they usually are.
 */
export async function announceHoldChangeIfAlone(
  deps: { db: Pick<Database, 'holdChanges' | 'holds'>; jobs: Jobs },
  multihash: string,
  cid: string,
  self: HolderRef,
  change: 'added' | 'removed',
): Promise<void> {
  const me = `${self.kind}:${self.key}`;
  const { holders } = await deps.db.holds.of(multihash);
  if (holders.some((h) => h !== me)) return;
  await announceHoldChange(deps, multihash, cid, change === 'added' ? self : undefined);
}
