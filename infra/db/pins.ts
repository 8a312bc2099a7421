import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { userContentKey } from './by-id.js';
import { batchedById } from './batch.js';
import { isDuplicateKey } from './errors.js';
import { heldQueries, type HolderKind } from './holds.js';
import type { PinInput } from '../temporal/contracts/pins.js';
import { count } from './count.js';
import { after } from './pages.js';

export type PinStatus = 'queued' | 'pinning' | 'pinned' | 'failed';

export interface PinRecord {
  /** `<userId>:<multihash>` (by-id.ts): a user has one request per piece of content. */
  _id: string;
  /** The public request ID, new for every request (a deleted one's is not reused). */
  requestId: string;
  userId: string;
  cid: string;
  multihash: string;
  name: string | null;
  description: string | null;
  origins: string[];
  metadata: Record<string, string>;
  status: PinStatus;
  error: { reason: string; details: string } | null;
  size: number | null;
  createdAt: number;
  updatedAt: number;
  pinnedAt: number | null;
  /** When the pin gives up (`failed`, TIMEOUT) if the content was not fetched. */
  deadline: number;
}

const schema = new Schema<PinRecord>(
  {
    _id: { type: String, required: true },
    requestId: { type: String, required: true },
    userId: { type: String, required: true },
    cid: { type: String, required: true },
    multihash: { type: String, required: true },
    name: { type: String, default: null },
    description: { type: String, default: null },
    origins: { type: [String], default: [] },
    metadata: { type: Schema.Types.Mixed, default: {} },
    status: { type: String, required: true },
    error: { type: Schema.Types.Mixed, default: null },
    size: { type: Number, default: null },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
    pinnedAt: { type: Number, default: null },
    deadline: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
schema.index({ userId: 1, createdAt: -1, _id: -1 });
schema.index({ userId: 1, status: 1, createdAt: -1, _id: -1 });
// The sweep's requests left `queued` (stalled()).
schema.index({ status: 1, updatedAt: 1 });
schema.index({ multihash: 1 });
// A user's pins in content order: a usage rebuild and the audit read them a page at a time.
schema.index({ userId: 1, multihash: 1 });
schema.index({ requestId: 1 }, { unique: true });

/** The pin workflow's input for a request: what `jobs.start(pinJob, …)` is given. */
export const pinJobInput = (pin: PinRecord): PinInput => ({
  key: pin._id,
  requestId: pin.requestId,
  userId: pin.userId,
  cid: pin.cid,
  multihash: pin.multihash,
  origins: pin.origins,
  deadline: pin.deadline,
});

/** A search of one user's requests (the pinning service API's filters). */
export interface PinQuery {
  multihashes?: string[];
  statuses?: PinStatus[];
  name?: { text: string; match: 'exact' | 'iexact' | 'partial' | 'ipartial' };
  /** Created strictly before / after these times (ms). */
  before?: number;
  after?: number;
  /** Every pair must be in the request's metadata. */
  metadata?: Record<string, string>;
}

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The query as a filter. Everything but a name match other than `exact` is an equality, an
 * `$in` or a range, which the stack's FerretDB answers in SQLite. */
function matching(userId: string, q: PinQuery): Record<string, unknown> {
  const filter: Record<string, unknown> = { userId };
  if (q.multihashes) filter.multihash = { $in: q.multihashes };
  if (q.statuses) filter.status = { $in: q.statuses };
  if (q.name) {
    const { text, match } = q.name;
    const whole = match === 'exact' || match === 'iexact';
    filter.name =
      match === 'exact'
        ? text
        : { $regex: whole ? `^${escapeRegex(text)}$` : escapeRegex(text), ...(match.startsWith('i') ? { $options: 'i' } : {}) };
  }
  if (q.before !== undefined || q.after !== undefined) {
    filter.createdAt = { ...(q.before !== undefined ? { $lt: q.before } : {}), ...(q.after !== undefined ? { $gt: q.after } : {}) };
  }
  for (const [key, value] of Object.entries(q.metadata ?? {})) filter[`metadata.${key}`] = value;
  return filter;
}

type Active = 'queued' | 'pinning';
const ACTIVE: readonly PinStatus[] = ['queued', 'pinning'];

export function createPinStore(conn: Connection) {
  const Pins: Model<PinRecord> = conn.model<PinRecord>('Pin', schema, 'pins');
  // Every read of a request by its key: reads that come together (API status polls, the pin
  // workflows of a burst) share one `$in` query (batch.ts). Records are shared: not to be modified.
  const get = batchedById(Pins);

  /**
   * Moves request `requestId` (stored under `key`) from a status in `from` with `changes`: one
   * conditional update, found by `_id` (by-id.ts) and matching only while the record is that
   * request in such a status, so a late write of a deleted request never lands on its
   * successor under the same `_id`. The request as changed, or null when it did not match.
   */
  function transition(key: string, requestId: string, from: readonly PinStatus[], changes: Partial<PinRecord>): Promise<PinRecord | null> {
    return Pins.findOneAndUpdate(
      { _id: key, requestId, status: { $in: [...from] } },
      { $set: { ...changes, updatedAt: Date.now() } },
      { returnDocument: 'after' },
    )
      .lean<PinRecord>()
      .exec();
  }

  /** A pin request holds its content until it fails or is deleted (infra/db/holds.ts). */
  const holding = { status: { $ne: 'failed' as const } };
  const holder: HolderKind = {
    kind: 'pin',
    async holdersOf(multihash) {
      const rows = await Pins.find({ multihash, ...holding }, { requestId: 1, userId: 1, cid: 1, origins: 1, createdAt: 1 })
        .lean<Pick<PinRecord, 'requestId' | 'userId' | 'cid' | 'origins' | 'createdAt'>[]>()
        .exec();
      return rows.map((r) => ({ id: r.requestId, userId: r.userId, cid: r.cid, origins: r.origins ?? [], at: r.createdAt }));
    },
    async holds(key) {
      const pin = await get(key);
      return pin && pin.status !== 'failed' ? { id: pin.requestId, userId: pin.userId, cid: pin.cid, origins: pin.origins } : null;
    },
    ...heldQueries(Pins, holding, 'requestId'),
  };

  return {
    model: Pins,
    holder,

    /** Inserts the request, or returns the user's existing one for that content. */
    async createOrGet(pin: PinRecord): Promise<{ pin: PinRecord; created: boolean }> {
      // The existing request may be deleted between the failed insert and the read: try again.
      for (let attempt = 0; ; attempt++) {
        try {
          await Pins.create(pin);
          return { pin, created: true };
        } catch (err) {
          if (!isDuplicateKey(err) || attempt >= 5) throw err;
        }
        const existing = await get(pin._id);
        if (existing) return { pin: existing, created: false };
      }
    },

    /** Requests still `queued` since before `before`: their workflow may never have started. */
    stalled: (before: number, limit: number) =>
      Pins.find({ status: 'queued', updatedAt: { $lt: before } })
        .limit(limit)
        .lean<PinRecord[]>()
        .exec(),

    /** Newest first, of one status if given; `after` continues from the previous page's last
     * item. The pinning service API's lists (issue #12) and the scale benchmark read it. */
    list(userId: string, q: { status?: PinStatus; after?: { createdAt: number; id: string }; limit: number }): Promise<PinRecord[]> {
      const filter: Record<string, unknown> = { userId };
      if (q.status) filter.status = q.status;
      if (q.after) Object.assign(filter, after('createdAt', { at: q.after.createdAt, id: q.after.id }));
      return Pins.find(filter).sort({ createdAt: -1, _id: -1 }).limit(q.limit).lean<PinRecord[]>().exec();
    },

    /** The user's requests matching the query, newest first (creation times are unique per
     * user: core/pins.ts stamps them), at most `limit`. */
    search: (userId: string, q: PinQuery, limit: number) =>
      Pins.find(matching(userId, q)).sort({ createdAt: -1, _id: -1 }).limit(limit).lean<PinRecord[]>().exec(),

    /** How many of the user's requests match the query. */
    countMatching: (userId: string, q: PinQuery) => count(Pins, matching(userId, q)),

    /** A request by its public ID. */
    byRequestId: (requestId: string) => Pins.findOne({ requestId }).lean<PinRecord>().exec(),

    /** The user's request for the content. Lookups that come together share one query (batch.ts). */
    findForUser: (userId: string, multihash: string) => get(userContentKey(userId, multihash)),

    get,

    /** A failed request starts over (same request ID) when the user pins the CID again. */
    async retryFailed(key: string, requestId: string, origins: string[], deadline: number): Promise<PinRecord | null> {
      const changes = { status: 'queued' as const, error: null, origins, deadline };
      return transition(key, requestId, ['failed'], changes);
    },

    /** Moves an active request forward; a request that was deleted or already finished is left alone. */
    setStatus: (key: string, requestId: string, status: Active) => transition(key, requestId, ACTIVE, { status }),

    /** The request, when this call moved it to `pinned` (so its size is counted once); null otherwise. */
    markPinned: (key: string, requestId: string, size: number | null) =>
      transition(key, requestId, ACTIVE, { status: 'pinned', size, pinnedAt: Date.now(), error: null }),

    markFailed: (key: string, requestId: string, error: { reason: string; details: string }) =>
      transition(key, requestId, ACTIVE, { status: 'failed', error }),

    /** Deletes the request; returns what was deleted (null: nothing was), so that whoever
     * deleted a `pinned` one, and only they, give back its size (usage.ts). */
    delete: (key: string) => Pins.findOneAndDelete({ _id: key }).lean<PinRecord>().exec(),
  };
}

export type PinStore = ReturnType<typeof createPinStore>;
