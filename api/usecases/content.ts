// What the content use-cases share: CIDs and metadata as input, the storage quota, and the
// announcement that a hold changed.
import { z } from 'zod';
import { CidError, parseCid, type ParsedCid } from '../../infra/cid.js';
import { METADATA_MAX_KEYS, METADATA_MAX_VALUE } from '../../infra/constants.js';
import type { Database } from '../../infra/db/index.js';
import type { Plan } from '../../infra/plans.js';
import { requestSync, type HolderRef } from '../../infra/temporal/contracts/holds.js';
import type { Jobs } from '../../infra/temporal/jobs.js';
import { InvalidInput, LimitReached } from './errors.js';

export type { ParsedCid };

/** A CID given by a caller, any version and base; INVALID_CID otherwise. */
export function cidInput(value: string): ParsedCid {
  try {
    return parseCid(value);
  } catch (err) {
    throw new InvalidInput((err as CidError).message, 'INVALID_CID');
  }
}

export const metadataSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_]{1,64}$/, 'keys are 1 to 64 of A-Z, a-z, 0-9 and _'), z.string().max(METADATA_MAX_VALUE))
  .refine((m) => Object.keys(m).length <= METADATA_MAX_KEYS, `at most ${METADATA_MAX_KEYS} keys`);

export const MB = 1024 * 1024;

/** Early quota checks (before any work) may use a storage figure this old; the decision that
 * records an upload reads it fresh, under the user's storage lock. */
export const QUICK_USAGE_MS = 2_000;

/**
 * The one storage-quota check: STORAGE_LIMIT unless `adding` more bytes fit beside `usedBytes`.
 * Checks before any work ask for a single byte (is anything left at all?).
 */
export function assertStorageFits(plan: Plan, usedBytes: number, adding: number): void {
  if (usedBytes + adding > plan.storageMB * MB) throw storageFull(plan);
}

export const storageFull = (plan: Plan) =>
  new LimitReached('STORAGE_LIMIT', `your plan's storage quota of ${plan.storageMB} MB does not have room for this`);

/** Bytes the user may still store, from a figure at most QUICK_USAGE_MS old. */
export async function quickStorageLeft(db: Database, userId: string, plan: Plan): Promise<number> {
  return plan.storageMB * MB - (await db.usage(userId, { maxAgeMs: QUICK_USAGE_MS }));
}

/** After a record that holds content changed: its sync workflow makes Cluster match.
 * `added`: the change was only this record's insert or update. */
export async function holdsChanged(jobs: Jobs, cid: ParsedCid, added?: HolderRef): Promise<void> {
  await requestSync(jobs, cid.multihash, cid.v1, added);
}
