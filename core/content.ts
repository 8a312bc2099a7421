// What the content use-cases share: CIDs and metadata as input, the storage quota, and the
// announcement that a hold changed.
import { multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import { CidError, parseCid, type ParsedCid } from '../infra/ipfs/cid.js';
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import type { Config } from '../infra/config.js';
import { METADATA_MAX_KEYS, METADATA_MAX_VALUE, RECORD_COMPLETION_MS } from '../infra/constants.js';
import { isAnswerLost } from '../infra/db/errors.js';
import type { Database } from '../infra/db/index.js';
import { firstHold, type HoldKind, type Reserved } from '../infra/db/usage.js';
import type { Plan } from '../infra/plans.js';
import { announceHoldChange, type AddedHolder } from './hold-sync.js';
import { recordEvent, type EventDeps } from './webhook-events.js';
import type { Jobs } from '../infra/temporal/jobs.js';
import { asStupaError, InvalidInput, LimitReached, Unavailable } from './errors.js';

export type { ParsedCid };

/** A CID given by a caller, any version and base; INVALID_CID otherwise. */
export function cidInput(value: string): ParsedCid {
  try {
    return parseCid(value);
  } catch (err) {
    throw new InvalidInput((err as CidError).message, 'INVALID_CID');
  }
}

/** A dialable origin: a valid multiaddress that names the peer (`…/p2p/<peer id>`). */
export const origin = z.string().refine(
  (text) => {
    try {
      return multiaddr(text)
        .getComponents()
        .some((c) => c.name === 'p2p');
    } catch {
      return false;
    }
  },
  { message: 'must be a multiaddress ending in /p2p/<peer id>, e.g. /ip4/1.2.3.4/tcp/4001/p2p/12D3Koo…' },
);

export const metadataSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_]{1,64}$/, 'keys are 1 to 64 of A-Z, a-z, 0-9 and _'), z.string().max(METADATA_MAX_VALUE))
  .refine((m) => Object.keys(m).length <= METADATA_MAX_KEYS, `at most ${METADATA_MAX_KEYS} keys`);

export const MB = 1024 * 1024;

/**
 * The quota rule: STORAGE_LIMIT unless `adding` more bytes fit beside `usedBytes`. Checks
 * before any work ask for a single byte (is anything left at all?); the decision that records
 * an upload is `reserveStorage` (or `reserveHolding`), the same rule as one conditional update.
 */
export function assertStorageFits(plan: Plan, usedBytes: number, adding: number): void {
  if (usedBytes + adding > plan.storageMB * MB) throw storageFull(plan);
}

export const storageFull = (plan: Plan) =>
  new LimitReached('STORAGE_LIMIT', `your plan's storage quota of ${plan.storageMB} MB does not have room for this`);

/**
 * Bytes the user may still store, from the user's counter: as this process read it within the
 * last USAGE_MEMORY_MS (`fresh` false: a burst of small uploads reads it once), or read now
 * (`fresh`; always with `{ fresh: true }`). A caller refuses only on a fresh reading, and relies
 * on an older one only where a later change cannot matter: the decision that counts is the
 * reservation (`reserveHolding`).
 */
export async function storageLeft(
  db: Database,
  userId: string,
  plan: Plan,
  options: { fresh?: boolean } = {},
): Promise<{ left: number; fresh: boolean }> {
  const limit = plan.storageMB * MB;
  const lately = options.fresh ? undefined : db.usage.usedLately(userId);
  if (lately !== undefined) return { left: limit - lately, fresh: false };
  return { left: limit - (await db.usage.used(userId)), fresh: true };
}

/**
 * Counts `bytes` more of `cid` against the user's storage if they fit, or throws STORAGE_LIMIT.
 * One atomic update, so concurrent uploads of an account never together pass the quota and never
 * wait for each other. Whoever reserves gives the bytes back if their write fails (`giveBack`),
 * and logs its change first (naming its process: infra/db/processes.ts). A reservation whose answer
 * was lost asks for a recount (`recountLater`).
 */
export async function reserveStorage(db: Database, userId: string, plan: Plan, cid: ParsedCid, bytes: number): Promise<void> {
  let fits: boolean;
  try {
    fits = (await db.usage.reserve(userId, bytes, plan.storageMB * MB)) !== null;
  } catch (err) {
    if (isAnswerLost(err)) recountLater(db, userId, cid);
    throw err;
  }
  if (!fits) throw storageFull(plan);
}

/**
 * The quota's webhook events after a write that took the user's storage from `usedAfter -
 * added` to `usedAfter`: `quota.near` on passing 80 % of the plan's storage, `quota.reached` on
 * passing 100 % (or, with `refused`, on a write refused for lack of room). Each at most once a
 * UTC day per user (the event ID names the day), so a user at the edge is not flooded.
 */
export async function quotaEvents(
  deps: EventDeps,
  userId: string,
  plan: Plan,
  usedAfter: number,
  added: number,
  refused = false,
): Promise<void> {
  const limit = plan.storageMB * MB;
  const before = usedAfter - added;
  const day = new Date().toISOString().slice(0, 10);
  for (const [type, at] of [
    ['quota.near', 0.8 * limit],
    ['quota.reached', limit],
  ] as const) {
    const crossed = before < at && usedAfter >= at;
    if (!crossed && !(refused && type === 'quota.reached')) continue;
    await recordEvent(deps, userId, {
      type,
      subject: `quota:${userId}`,
      data: {
        storageUsedBytes: usedAfter,
        storageLimitBytes: limit,
        percentUsed: limit ? Math.round((usedAfter / limit) * 1000) / 10 : 100,
      },
      id: `msg_${type.replace('.', '_')}_${userId}_${day}`,
    });
  }
}

/**
 * Asks the sweep to recount the user's storage (activities/counts.ts), for a write of the
 * counter that may be off: a reservation whose answer was lost (applied or not, nobody can
 * tell, and sending an increment again could count it twice), a give-back that failed. In the
 * background, retried while MongoDB is away (`completing`): the request's own answer does not
 * wait for it. Found by npm run chaos: a FerretDB killed under a reservation left the counter
 * 42 bytes high, which no holding showed.
 */
export function recountLater(db: Database, userId: string, cid: ParsedCid): void {
  void completing(() => db.holdChanges.append(cid.multihash, cid.v1, { userId, recount: true })).catch(() => undefined);
}

/** Gives back a reservation whose record was not written; if that fails, the sweep recounts. */
export async function giveBack(db: Database, userId: string, cid: ParsedCid, reserved: Reserved): Promise<void> {
  if (reserved.used === 0 && reserved.files === 0) return;
  await db.usage.add(userId, { used: -reserved.used, files: -reserved.files }).catch(() => recountLater(db, userId, cid));
}

/**
 * Reserves what holding content of `size` bytes as a record of `kind` adds to the user's
 * storage, and returns what it reserved (settled by `usage.hold(…, reserved)`, or `giveBack`)
 * and `used` just after it (what the quota's events compare).
 * It first reserves the whole size, without a read: new content, the common case, adds exactly
 * that, to `used` and (a file or an object: infra/db/usage-records.ts `firstHold`) to `files`, so
 * that its holding step has no counter left to write. Only when that does not fit is what it
 * adds to `used` read (nothing when the user holds the content already) and reserved; so the
 * answer is the quota's, and a reservation never costs more than a read and two updates.
 * Meanwhile the whole size is counted for a moment too much
 * while such an upload is in flight, as any reservation is until it settles. The caller logs its
 * change first (naming its process: infra/db/processes.ts); a reservation whose answer was lost asks
 * for a recount (`recountLater`).
 */
export async function reserveHolding(
  db: Database,
  userId: string,
  plan: Plan,
  cid: ParsedCid,
  kind: HoldKind,
  size: number,
): Promise<Reserved & { usedAfter: number }> {
  const limit = plan.storageMB * MB;
  const { files } = firstHold(kind, size);
  try {
    const whole = await db.usage.reserve(userId, size, limit, files);
    if (whole !== null) return { used: size, files, usedAfter: whole };
    const adds = await db.usage.cost(userId, cid.multihash, kind, size);
    const part = adds === size ? null : await db.usage.reserve(userId, adds, limit);
    if (part === null) throw storageFull(plan);
    return { used: adds, files: 0, usedAfter: part };
  } catch (err) {
    if (isAnswerLost(err)) recountLater(db, userId, cid);
    throw err;
  }
}

/**
 * After a record that holds content changed: logged, then Cluster is made to match
 * (core/hold-sync.ts). `added`: the change was only this record's insert or update. With
 * `cluster` and `config` in `deps` (the API's components have them) it is made good inline,
 * otherwise through the content's sync workflow.
 */
export async function holdsChanged(
  deps: { db: Database; jobs: Jobs; cluster?: ClusterClient; config?: Pick<Config, 'cluster'> },
  cid: ParsedCid,
  added?: AddedHolder,
  options: { logged?: boolean } = {},
): Promise<void> {
  await announceHoldChange(deps, cid.multihash, cid.v1, added, options);
}

/**
 * Runs a step that completes a change whose record is written already (its counters, its
 * folder's count, the announcement of its hold), again while MongoDB does not answer, for up to
 * RECORD_COMPLETION_MS: a FerretDB restart takes about 3 s, and a request that failed there
 * would leave its record without them (measured by npm run chaos: an upload answered 503 with
 * its file written, uncounted and never pinned). A longer outage still fails the request; the
 * audit names what it left.
 */
export async function completing<T>(step: () => Promise<T>): Promise<T> {
  const until = Date.now() + RECORD_COMPLETION_MS;
  for (let wait = 250; ; wait = Math.min(wait * 2, 2_000)) {
    try {
      return await step();
    } catch (err) {
      const unavailable = asStupaError(err) instanceof Unavailable;
      if (!unavailable || Date.now() + wait > until) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
