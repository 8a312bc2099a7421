// Pin use-cases: a pin request is a MongoDB record and a hold on the content. Content Kubo has
// already is pinned inline, as an upload's is; anything else goes to a Temporal workflow
// (workflows/pins.ts) that takes it from queued to pinned or failed.
import { announceHoldChange } from './hold-sync.js';
import { PIN_INLINE_WAIT_MS } from '../infra/constants.js';
import { contentSizes, peerAddresses } from '../infra/ipfs/kubo.js';
import { createPinSteps } from './pin-steps.js';
import { randomBase62 } from '../infra/secrets.js';
import { userContentKey } from '../infra/db/by-id.js';
import { pinJobInput, type PinQuery, type PinRecord } from '../infra/db/pins.js';
import type { ParsedCid } from '../infra/ipfs/cid.js';
import { pinJob } from '../infra/temporal/contracts/pins.js';
import { pinEvent, recordEvent } from './webhook-events.js';
import { filesOfCid, removeFile, severalFiles } from './files.js';
import { assertStorageFits, holdsChanged } from './content.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { NotFound, Unavailable } from './errors.js';

export type { PinQuery, PinRecord };
type PinDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'config' | 'kubo' | 'cluster'>;

export interface PinRequest {
  cid: ParsedCid;
  name?: string;
  description?: string;
  origins: string[];
  metadata: Record<string, string>;
}

/** Records the caller's request to pin content (or returns the one they have), and pins it or starts its workflow. */
export async function requestPin(deps: PinDeps, caller: Caller, input: PinRequest): Promise<PinRecord> {
  const { user, plan } = caller;
  // Unique per user, so that paging by creation time alone (the pinning service API's
  // `before`) never skips or repeats a request.
  const now = await deps.db.counters.stamp(`pin-created:${user._id}`, Date.now());
  const timeoutMs = deps.config.pins.timeoutMs;
  const { pin, created } = await deps.db.pins.createOrGet({
    _id: userContentKey(user._id, input.cid.multihash),
    requestId: `pin_${randomBase62(20)}`,
    userId: user._id,
    cid: input.cid.v1,
    multihash: input.cid.multihash,
    name: input.name ?? null,
    description: input.description ?? null,
    origins: input.origins,
    metadata: input.metadata,
    status: 'queued',
    error: null,
    size: null,
    createdAt: now,
    updatedAt: now,
    pinnedAt: null,
    deadline: now + timeoutMs,
  });
  if (!created && pin.status === 'pinned') return pin;
  if (created) {
    // Checked after the insert so that asking again for an existing request is never refused.
    try {
      assertStorageFits(plan, await deps.db.usage.used(user._id), 1);
    } catch (err) {
      await deps.db.pins.delete(pin._id);
      throw err;
    }
    await deps.db.analytics.tryRecord(user._id, now, { pins: 1 });
  }

  // A failed request starts over; a queued or pinning one is (re)attached to its workflow,
  // which is a no-op when it runs, and repairs a request whose start was lost. Whoever pins asks
  // Cluster (activities/holds.ts says why that is safe).
  let current = pin;
  const fresh = created || pin.status === 'failed';
  if (pin.status === 'failed') {
    current = (await deps.db.pins.retryFailed(pin._id, pin.requestId, input.origins, now + timeoutMs)) ?? pin;
  }
  if (fresh) {
    // Recorded before anything pins, so `pin.queued` comes before `pin.pinned`.
    await recordEvent(deps, user._id, pinEvent('pin.queued', current));
    const done = await pinLocal(deps, current);
    if (done) return done;
  }
  // A new request replaces a workflow left by an earlier, deleted request under the same ID.
  await deps.jobs.start(pinJob, pinJobInput(current), { replace: fresh });
  return current;
}

/**
 * Pins a new request's content inline when Kubo has its root block, as an upload pins what it
 * added: Temporal's and the worker's part of a pin (about 30 ms of CPU on the bench's machine,
 * twice the rest) is left to content that must be fetched. Returns the request as it ends,
 * or null when the workflow must take it on: the content is not local, Cluster failed, or did
 * not report it pinned within PIN_INLINE_WAIT_MS (its other blocks are not local). A process
 * that dies in between leaves the request `queued`, and the sweep starts its workflow
 * (PIN_STALLED_MS).
 */
async function pinLocal(deps: PinDeps, pin: PinRecord): Promise<PinRecord | null> {
  let size: number;
  try {
    ({ size } = await contentSizes(deps.config.kubo.apiUrl, pin.cid, AbortSignal.timeout(5_000), { offline: true }));
  } catch {
    return null;
  }
  const steps = createPinSteps(deps);
  const content = { key: pin._id, requestId: pin.requestId, cid: pin.cid, multihash: pin.multihash, origins: pin.origins };
  try {
    // Deleted meanwhile: its delete cancelled a workflow that never was; nothing more to do.
    if ((await steps.requestClusterPin(content, { here: true })) === 'gone') return pin;
  } catch {
    return null;
  }
  if (!(await steps.awaitPinned(pin.cid, PIN_INLINE_WAIT_MS)).pinned) return null;
  return (await steps.completePin({ ...content, size })) ?? pin;
}

export async function getPin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<PinRecord> {
  const pin = await deps.db.pins.findForUser(userId, cid.multihash);
  if (!pin) throw new NotFound('pin');
  return pin;
}

/**
 * Removes the caller's pin request and file record of the content, which were its holds; it
 * leaves Cluster if nobody else holds it (core/hold-sync.ts). With several files of the
 * content it is 409 naming them, and nothing is removed (DELETE /files/:fileId removes one).
 * Each record a delete actually removed releases its hold (infra/db/usage.ts): the content
 * leaves the user's storage count with the last of them, and a concurrent delete of the same
 * records gives nothing back twice.
 */
export async function deletePin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<{ cid: string }> {
  const [pin, files] = await Promise.all([deps.db.pins.findForUser(userId, cid.multihash), filesOfCid(deps, userId, cid)]);
  if (!pin && files.length === 0) throw new NotFound('pin');
  if (files.length > 1) throw severalFiles(cid, files);
  await deps.db.usage.ensure(userId); // before any record changes (infra/db/usage.ts)
  if (pin) await removeRequest(deps, pin);
  if (files[0]) await removeFile(deps, files[0]);
  await holdsChanged(deps, cid, undefined, { logged: true });
  return { cid: pin?.cid ?? files[0]!.cid };
}

/** Removes one pin request (its hold change is logged here, the caller's to announce). */
async function removeRequest(deps: PinDeps, pin: PinRecord): Promise<void> {
  // Cancelled before the record goes: while the record exists, no new request (and so no new
  // workflow under the same ID) can be made for this user and content.
  await deps.jobs.cancel(pinJob, { cid: pin.cid, userId: pin.userId });
  // Logged before the record goes, with the counter its removal moves (activities/counts.ts).
  await deps.db.holdChanges.append(pin.multihash, pin.cid, { userId: pin.userId });
  const removed = await deps.db.pins.delete(pin._id);
  // Only a pinned request was counted (activities/pins.ts); whoever removed it releases it.
  if (removed?.status === 'pinned') {
    const released = await deps.db.usage.release(pin.userId, removed.multihash, 'pin');
    await deps.db.analytics.tryRecord(pin.userId, Date.now(), { unpins: 1, storedBytes: released.used });
  }
}

// Pin requests by their request ID, as the pinning service API addresses them.

/** The caller's requests matching the query, newest first, and how many match in all. */
export async function findPins(
  deps: PinDeps,
  userId: string,
  q: PinQuery,
  limit: number,
): Promise<{ count: number; results: PinRecord[] }> {
  const [count, results] = await Promise.all([deps.db.pins.countMatching(userId, q), deps.db.pins.search(userId, q, limit)]);
  // The two reads see different moments: a pin that turned pinned between them is in one and not
  // the other. A short page is every match, so it is the count; a full page is at least its size.
  return { count: results.length < limit ? results.length : Math.max(count, results.length), results };
}

export async function getPinRequest(deps: PinDeps, userId: string, requestId: string): Promise<PinRecord> {
  const pin = await deps.db.pins.byRequestId(requestId);
  if (!pin || pin.userId !== userId) throw new NotFound('pin request');
  return pin;
}

/** Removes the request; the content leaves Cluster if nothing else holds it. The user's file
 * record for the same content, if any, stays (unlike DELETE /pin/:cid, which removes both). */
export async function deletePinRequest(deps: PinDeps, userId: string, requestId: string): Promise<void> {
  const pin = await getPinRequest(deps, userId, requestId);
  await deps.db.usage.ensure(userId);
  await removeRequest(deps, pin);
  await announceHoldChange(deps, pin.multihash, pin.cid, undefined, { logged: true });
}

/**
 * Replaces a request with a new one (a new request ID; the old one is gone afterwards). For
 * other content the new request is made first, so a refused one (over the quota) leaves the
 * old request as it was. For the same content the old record makes way for the new one under
 * the same key, and the hold change is announced after, so no sync round in between unpins.
 */
export async function replacePinRequest(deps: PinDeps, caller: Caller, requestId: string, input: PinRequest): Promise<PinRecord> {
  const old = await getPinRequest(deps, caller.user._id, requestId);
  await deps.db.usage.ensure(caller.user._id);
  if (old.multihash !== input.cid.multihash) {
    const made = await requestPin(deps, caller, input);
    await removeRequest(deps, old);
    await announceHoldChange(deps, old.multihash, old.cid, undefined, { logged: true });
    return made;
  }
  await removeRequest(deps, old);
  const made = await requestPin(deps, caller, input);
  await holdsChanged(deps, input.cid);
  return made;
}

const LOOPBACK = /^\/(ip4\/127\.|ip6\/::1\/|dns[46]?\/localhost\/)/;
const DELEGATES_FRESH_MS = 60_000;

/**
 * The peers a client should send content to (the pinning service API's `delegates`): the
 * configured PIN_DELEGATES, or else the stack's Kubo as it announces itself, loopback
 * addresses only when it has no other. Kubo is asked at most once a minute; while it cannot
 * be asked, the last answer stands.
 */
export function pinDelegates(deps: Pick<UseCaseDeps, 'config' | 'kubo'>): () => Promise<string[]> {
  let known: { at: number; addresses: string[] } | undefined;
  return async () => {
    if (deps.config.pins.delegates.length > 0) return deps.config.pins.delegates;
    if (known && Date.now() - known.at < DELEGATES_FRESH_MS) return known.addresses;
    try {
      const all = [...new Set(await peerAddresses(deps.kubo, AbortSignal.timeout(5_000)))];
      const reachable = all.filter((a) => !LOOPBACK.test(a));
      known = { at: Date.now(), addresses: (reachable.length > 0 ? reachable : all).slice(0, 20) };
    } catch {
      if (!known) throw new Unavailable('kubo');
    }
    return known.addresses;
  };
}
