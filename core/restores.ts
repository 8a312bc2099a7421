// Restores of the database from a backup, and what they mean for the pins no record holds.
//
// A MongoDB restored from a backup forgets every record written after the backup was taken;
// Cluster, restored or not, still pins their content. Such a pin looks like a stray (pinned for
// this service, held by no record), and unpinning it would lose what a user stored. Every pin of
// ours says when it was made (`at`, core/hold-sync.ts `pinMetadata`), so a pin no record holds
// is kept, never unpinned by a repair, when it was made between a backup and its restore (a
// record the restore forgot may have held it), or when it does not say (made by a version
// before `at`) and any restore was made. Only the operator releases those
// (docs/operations/audit.md).
import { RESTORE_CLOCK_MARGIN_MS } from '../infra/constants.js';
import type { Database } from '../infra/db/index.js';
import type { RestoreRecord } from '../infra/db/restores.js';
import { InvalidInput } from './errors.js';

export type { RestoreRecord };

/**
 * Records that the database was restored from a backup taken at `takenAt`, at `restoredAt`
 * (now, unless given). Called by the admin CLI's restore and the embedded one, once the data is
 * back. Recording the same restore again changes nothing. Throws InvalidInput when a time is
 * not a date, is in the future, or the backup is not older than its restore.
 */
export async function recordRestore(db: Pick<Database, 'restores'>, restore: { takenAt: Date; restoredAt?: Date }): Promise<RestoreRecord> {
  const now = Date.now();
  const takenAt = restore.takenAt.getTime();
  const restoredAt = restore.restoredAt?.getTime() ?? now;
  if (!Number.isFinite(takenAt)) throw new InvalidInput('the time the backup was taken is not a valid date');
  if (!Number.isFinite(restoredAt)) throw new InvalidInput('the time of the restore is not a valid date');
  // A window reaching into the future would keep the strays of pins not made yet.
  if (takenAt > now) throw new InvalidInput(`the backup's time ${new Date(takenAt).toISOString()} is in the future`);
  if (restoredAt > now) throw new InvalidInput(`the restore's time ${new Date(restoredAt).toISOString()} is in the future`);
  if (takenAt >= restoredAt)
    throw new InvalidInput(
      `the backup (${new Date(takenAt).toISOString()}) must be taken before its restore (${new Date(restoredAt).toISOString()})`,
    );
  return db.restores.record(takenAt, restoredAt);
}

/** Why a pin no record holds may be a record's that a restore forgot: the restore, and the pin's
 * time (null when it has none). */
export interface LostByRestore {
  restore: RestoreRecord;
  at: number | null;
}

/**
 * Whether a pin of ours that no record holds may have been made for a record a restore forgot:
 * its `at` (its metadata's, a string of ms) falls in a restore's window, from the backup's
 * `takenAt` less RESTORE_CLOCK_MARGIN_MS (the pin's and the backup's clocks differ) to its
 * `restoredAt`; or it has no `at` and a restore was made (the newest is named). Null when it
 * cannot be: no restore was made, or the pin was made outside every window. `restores`: as
 * `db.restores.all()` gives them, read once by the caller.
 */
export function lostByRestore(at: string | undefined, restores: RestoreRecord[]): LostByRestore | null {
  if (restores.length === 0) return null;
  const ms = at !== undefined && /^\d{1,16}$/.test(at) ? Number(at) : null;
  if (ms === null) return { restore: restores.reduce((a, r) => (r.restoredAt > a.restoredAt ? r : a)), at: null };
  const restore = restores.find((r) => ms >= r.takenAt - RESTORE_CLOCK_MARGIN_MS && ms <= r.restoredAt);
  return restore ? { restore, at: ms } : null;
}
