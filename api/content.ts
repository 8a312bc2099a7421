// What the content endpoints share: CID and metadata validation, and the holds on content.
import { z } from 'zod';
import { CidError, parseCid, type ParsedCid } from '../infra/cid.js';
import { METADATA_MAX_KEYS, METADATA_MAX_VALUE } from '../infra/constants.js';
import type { Database } from '../infra/db/index.js';
import type { HolderRef } from '../infra/db/holds.js';
import type { Jobs } from '../infra/jobs.js';
import type { Plan } from '../infra/plans.js';
import { InvalidInput, PlanLimitReached } from './errors.js';

export interface ContentDeps {
  db: Database;
  jobs: Jobs;
}

export function cidParam(value: string): ParsedCid {
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
 * records an upload reads it fresh. */
export const QUICK_USAGE_MS = 2_000;

/** 402 when the user's stored bytes already reach the plan's quota. */
export function assertStorageLeft(storageBytes: number, plan: Plan): void {
  if (storageBytes >= plan.storageMB * MB) {
    throw new PlanLimitReached('STORAGE_LIMIT', `your plan's storage quota of ${plan.storageMB} MB is used up`);
  }
}

/** After a record that holds content changed: its sync workflow makes Cluster match.
 * `added`: the change was only this record's insert or update. */
export async function holdsChanged(deps: ContentDeps, cid: ParsedCid, added?: HolderRef): Promise<void> {
  await deps.jobs.requestSync(cid.multihash, cid.v1, added);
}
