// Pin use-cases: a pin request is a MongoDB record, a hold on the content, and a Temporal
// workflow (workflows/pins.ts) that takes it from queued to pinned or failed.
import { randomBase62 } from '../../infra/secrets.js';
import { userContentKey } from '../../infra/db/by-id.js';
import { pinJobInput, type PinRecord } from '../../infra/db/pins.js';
import type { ParsedCid } from '../../infra/cid.js';
import { pinJob } from '../../infra/temporal/contracts/pins.js';
import { fileMoved } from './folders.js';
import { assertStorageFits, holdsChanged } from './content.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { NotFound } from './errors.js';

export type { PinRecord };
type PinDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'config'>;

export interface PinRequest {
  cid: ParsedCid;
  name?: string;
  description?: string;
  origins: string[];
  metadata: Record<string, string>;
}

/** Records the caller's request to pin content (or returns the one they have) and starts it. */
export async function requestPin(deps: PinDeps, caller: Caller, input: PinRequest): Promise<PinRecord> {
  const { user, plan } = caller;
  const now = Date.now();
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
  }

  // A failed request starts over; a queued or pinning one is (re)attached to its workflow,
  // which is a no-op when it runs, and repairs a request whose start was lost. The workflow
  // itself asks Cluster to pin (activities/holds.ts says why that is safe).
  let current = pin;
  if (pin.status === 'failed') {
    current = (await deps.db.pins.retryFailed(pin._id, pin.requestId, input.origins, now + timeoutMs)) ?? pin;
  }
  // A new request replaces a workflow left by an earlier, deleted request under the same ID.
  await deps.jobs.start(pinJob, pinJobInput(current), { replace: created || pin.status === 'failed' });
  return current;
}

export async function getPin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<PinRecord> {
  const pin = await deps.db.pins.findForUser(userId, cid.multihash);
  if (!pin) throw new NotFound('pin');
  return pin;
}

/**
 * Removes the caller's pin and file records for the content, which were its holds; the sync
 * workflow unpins it from Cluster if nobody else holds it. The records' sizes leave the
 * user's storage count by what each delete actually removed, so a concurrent delete of the
 * same records gives nothing back twice.
 */
export async function deletePin(deps: PinDeps, userId: string, cid: ParsedCid): Promise<{ cid: string }> {
  const [pin, file] = await Promise.all([
    deps.db.pins.findForUser(userId, cid.multihash),
    deps.db.files.findForUser(userId, cid.multihash),
  ]);
  if (!pin && !file) throw new NotFound('pin');
  await deps.db.usage.ensure(userId); // before any record changes (infra/db/usage.ts)
  if (pin) {
    // Cancelled before the record goes: while the record exists, no new request (and so no
    // new workflow under the same ID) can be made for this user and content.
    await deps.jobs.cancel(pinJob, { cid: pin.cid, userId });
    const removed = await deps.db.pins.delete(pin._id);
    if (removed?.status === 'pinned') await deps.db.usage.add(userId, { pinned: -(removed.size ?? 0) });
  }
  if (file) {
    const removed = await deps.db.files.delete(file._id);
    if (removed) await deps.db.usage.add(userId, { files: -removed.size });
    if (removed) await fileMoved(deps.db, removed.folderId, null);
  }
  await holdsChanged(deps, cid);
  return { cid: pin?.cid ?? file!.cid };
}
