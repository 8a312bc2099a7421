import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

export type PinStatus = 'queued' | 'pinning' | 'pinned' | 'failed';

export interface PinRecord {
  /** The request ID. */
  _id: string;
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
// One request per user and content: pinning the same CID twice gives the same request.
schema.index({ userId: 1, multihash: 1 }, { unique: true });
schema.index({ userId: 1, createdAt: -1, _id: -1 });

export function createPinStore(conn: Connection) {
  const Pins: Model<PinRecord> = conn.model<PinRecord>('Pin', schema, 'pins');
  return {
    model: Pins,

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
        const existing = await Pins.findOne({ userId: pin.userId, multihash: pin.multihash }).lean<PinRecord>().exec();
        if (existing) return { pin: existing, created: false };
      }
    },

    async totalPinnedSize(userId: string): Promise<number> {
      const [row] = await Pins.aggregate<{ total: number }>([
        { $match: { userId, status: 'pinned' } },
        { $group: { _id: null, total: { $sum: '$size' } } },
      ]).exec();
      return row?.total ?? 0;
    },

    /** Requests still `queued` since before `before`: their workflow may never have started. */
    stalled: (before: number, limit: number) =>
      Pins.find({ status: 'queued', updatedAt: { $lt: before } })
        .limit(limit)
        .lean<PinRecord[]>()
        .exec(),

    findForUser: (userId: string, multihash: string) => Pins.findOne({ userId, multihash }).lean<PinRecord>().exec(),

    get: (requestId: string) => Pins.findById(requestId).lean<PinRecord>().exec(),

    /** A failed request starts over (same request ID) when the user pins the CID again. */
    retryFailed: (requestId: string, origins: string[], deadline: number) =>
      Pins.findOneAndUpdate(
        { _id: requestId, status: 'failed' },
        { $set: { status: 'queued', error: null, origins, deadline, updatedAt: Date.now() } },
        { returnDocument: 'after' },
      )
        .lean<PinRecord>()
        .exec(),

    /** Moves a request forward; a request that was deleted or already finished is left alone. */
    async setStatus(requestId: string, status: 'pinning'): Promise<void> {
      await Pins.updateOne({ _id: requestId, status: { $in: ['queued', 'pinning'] } }, { $set: { status, updatedAt: Date.now() } }).exec();
    },

    /** True when this call moved the request to `pinned` (so its size is counted once). */
    async markPinned(requestId: string, size: number | null): Promise<boolean> {
      const now = Date.now();
      const res = await Pins.updateOne(
        { _id: requestId, status: { $in: ['queued', 'pinning'] } },
        { $set: { status: 'pinned', size, pinnedAt: now, updatedAt: now, error: null } },
      ).exec();
      return res.modifiedCount === 1;
    },

    async markFailed(requestId: string, error: { reason: string; details: string }): Promise<boolean> {
      const res = await Pins.updateOne(
        { _id: requestId, status: { $in: ['queued', 'pinning'] } },
        { $set: { status: 'failed', error, updatedAt: Date.now() } },
      ).exec();
      return res.modifiedCount === 1;
    },

    async delete(requestId: string): Promise<boolean> {
      return (await Pins.deleteOne({ _id: requestId }).exec()).deletedCount === 1;
    },
  };
}

export type PinStore = ReturnType<typeof createPinStore>;
