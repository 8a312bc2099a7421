// Pin use-cases: a pin request is a MongoDB record, a hold on the content, and a Temporal
// workflow (workflows/pin.ts) that takes it from queued to pinned or failed.
import { randomBase62 } from '../../infra/secrets.js';
import { userContentKey } from '../../infra/db/by-id.js';
import type { PinRecord } from '../../infra/db/pins.js';
import type { ParsedCid } from '../../infra/cid.js';
import type { Plan } from '../../infra/plans.js';
import type { User } from '../../infra/db/users.js';
import { NotFound } from '../errors.js';
import { QUICK_USAGE_MS, assertStorageLeft, holdsChanged, type ContentDeps } from '../content.js';

export interface PinDeps extends ContentDeps {
  pinTimeoutMs: number;
}

export interface PublicPin {
  requestId: string;
  cid: string;
  status: PinRecord['status'];
  name: string | null;
  description: string | null;
  origins: string[];
  metadata: Record<string, string>;
  size: number | null;
  createdAt: number;
  updatedAt: number;
  pinnedAt: number | null;
  error: { reason: string; details: string } | null;
}

export const toPublicPin = (p: PinRecord): PublicPin => ({
  requestId: p.requestId,
  cid: p.cid,
  status: p.status,
  name: p.name,
  description: p.description,
  origins: p.origins,
  metadata: p.metadata,
  size: p.size,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt,
  pinnedAt: p.pinnedAt,
  error: p.error,
});

export async function requestPin(
  deps: PinDeps,
  caller: { user: User; plan: Plan },
  input: { cid: ParsedCid; name?: string; description?: string; origins: string[]; metadata: Record<string, string> },
): Promise<PublicPin> {
  const { user, plan } = caller;
  const now = Date.now();
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
    deadline: now + deps.pinTimeoutMs,
  });
  if (!created && pin.status === 'pinned') return toPublicPin(pin);
  if (created) {
    // Checked after the insert so that asking again for an existing request is never refused.
    try {
      assertStorageLeft(await deps.db.usage(user._id, { maxAgeMs: QUICK_USAGE_MS }), plan);
    } catch (err) {
      await deps.db.pins.delete(pin._id);
      throw err;
    }
  }

  // A failed request starts over; a queued or pinning one is (re)attached to its workflow,
  // which is a no-op when it runs, and repairs a request whose start was lost. The workflow
  // itself asks Cluster to pin (activities/holds.ts says why that is safe).
  let current = pin;
  if (pin.status === 'failed') {
    current = (await deps.db.pins.retryFailed(pin._id, pin.requestId, input.origins, now + deps.pinTimeoutMs)) ?? pin;
  }
  await deps.jobs.startPin(current, created || pin.status === 'failed');
  return toPublicPin(current);
}

export async function getPin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<PublicPin> {
  const pin = await deps.db.pins.findForUser(userId, cid.multihash);
  if (!pin) throw new NotFound('pin');
  return toPublicPin(pin);
}

/**
 * Removes the caller's pin and file records for the content, which were its holds; the sync
 * workflow unpins it from Cluster if nobody else holds it.
 */
export async function deletePin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<{ cid: string }> {
  const [pin, file] = await Promise.all([
    deps.db.pins.findForUser(userId, cid.multihash),
    deps.db.files.findForUser(userId, cid.multihash),
  ]);
  if (!pin && !file) throw new NotFound('pin');
  if (pin) {
    // Cancelled before the record goes: while the record exists, no new request (and so no
    // new workflow under the same ID) can be made for this user and content.
    await deps.jobs.cancelPin(pin.cid, userId);
    await deps.db.pins.delete(pin._id);
  }
  if (file) await deps.db.files.delete(file._id);
  await holdsChanged(deps, cid);
  return { cid: pin?.cid ?? file!.cid };
}
