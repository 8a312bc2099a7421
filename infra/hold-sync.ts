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
