// Storage use per user, counted: one document per user (`_id` = userId) that every change of a
// file record or of a pin's `pinned` size adjusts with a single-document atomic update. It
// replaces summing the user's records at each upload, which grew with the user's records, and
// the per-user lock that made concurrent uploads of one account wait (or fail BUSY).
//
// Exactness rests on two rules the callers follow:
// - Each adjustment is derived from the record write that caused it, as that write reported
//   it: the document an upsert replaced, the one a delete removed, the transition a pin made.
//   Two requests racing on one record therefore adjust by what each actually changed.
// - Whoever changes a user's records calls `ensure` first (`reserve` and `used` do it
//   themselves). See `ensure` for why that makes the one-time backfill exact.
//
// A process that dies between a record write and its adjustment (milliseconds apart) leaves
// the counter off by that record; `npm run admin -- usage recount --user ID` recomputes it.
//
// Each operation here finds its document by `_id` through the index, and each update is
// atomic: on a MongoDB by itself, on the local stack's FerretDB through its patches
// (infra/stack/patches/ferretdb/: 0002 uses the `_id` index for a filter with more than the
// `_id`, 0003 makes a single-document update atomic; tests/usage.test.ts races 20 uploads).
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

export interface UsageRecord {
  /** The userId. */
  _id: string;
  /** Bytes of the user's file records. */
  files: number;
  /** Bytes of the user's pin requests that are `pinned`. */
  pinned: number;
  /** files + pinned, kept as one field so that the quota is a single-field condition. */
  used: number;
}

export interface UsageChange {
  files?: number;
  pinned?: number;
}

const schema = new Schema<UsageRecord>(
  {
    _id: { type: String, required: true },
    files: { type: Number, required: true },
    pinned: { type: Number, required: true },
    used: { type: Number, required: true },
  },
  { versionKey: false },
);

/** Counts a user's bytes from the records themselves: the slow path, once per user. */
export type CountFromRecords = (userId: string) => Promise<{ files: number; pinned: number }>;

const increments = (change: UsageChange) => {
  const files = change.files ?? 0;
  const pinned = change.pinned ?? 0;
  return { files, pinned, used: files + pinned };
};

export function createUsageStore(conn: Connection, countFromRecords: CountFromRecords) {
  const Usage: Model<UsageRecord> = conn.model<UsageRecord>('Usage', schema, 'usage');

  /**
   * Makes sure the user's document exists. A user created before counters existed has records
   * but no document: it is computed once from the records (the old aggregates) and inserted
   * only if still absent, so of two requests that both find it missing one inserts and the
   * other's count is dropped, never added. The count is exact because every writer of records
   * calls this before its write: the document then exists before any record changes, so the
   * inserted count (computed while it did not exist yet) includes no change that also adjusts
   * it, and misses none that happened earlier.
   */
  async function ensure(userId: string): Promise<void> {
    if (await Usage.exists({ _id: userId })) return;
    const counted = await countFromRecords(userId);
    await insertIfAbsent(userId, counted);
  }

  async function insertIfAbsent(userId: string, counted: { files: number; pinned: number }): Promise<void> {
    try {
      await Usage.create({ _id: userId, ...increments(counted) });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  return {
    model: Usage,
    ensure,

    /** A new user stores nothing yet: no backfill needed later. */
    init: (userId: string) => insertIfAbsent(userId, { files: 0, pinned: 0 }),

    /** Bytes the user stores now (files plus pinned content). */
    async used(userId: string): Promise<number> {
      let row = await Usage.findById(userId, { used: 1 }).lean<Pick<UsageRecord, 'used'>>().exec();
      if (!row) {
        await ensure(userId);
        row = await Usage.findById(userId, { used: 1 }).lean<Pick<UsageRecord, 'used'>>().exec();
      }
      return row?.used ?? 0;
    },

    /**
     * Adds `bytes` of files (negative: frees them) if the total stays within `limit`, in one
     * conditional update: concurrent reservations can never together pass the limit, and none
     * waits for another. False when it does not fit.
     */
    async reserve(userId: string, bytes: number, limit: number): Promise<boolean> {
      // No projection: FerretDB 1.24 refuses findAndModify's `fields`.
      const attempt = () =>
        Usage.findOneAndUpdate({ _id: userId, used: { $lte: limit - bytes } }, { $inc: increments({ files: bytes }) })
          .lean()
          .exec();
      if (await attempt()) return true;
      // No match: over the limit, or no document yet (a user from before counters).
      if (await Usage.exists({ _id: userId })) return false;
      await ensure(userId);
      return (await attempt()) !== null;
    },

    /** Applies what a record write changed. The caller called `ensure` before that write. */
    async add(userId: string, change: UsageChange): Promise<void> {
      const inc = increments(change);
      if (inc.files === 0 && inc.pinned === 0) return;
      await Usage.updateOne({ _id: userId }, { $inc: inc }).exec();
    },

    /** Recomputes the user's document from the records (an operator's repair, for an account
     * that is idle: changes made while it counts may be lost). */
    async recount(userId: string): Promise<UsageRecord> {
      const counted = increments(await countFromRecords(userId));
      await Usage.updateOne({ _id: userId }, { $set: counted }, { upsert: true }).exec();
      return { _id: userId, ...counted };
    },
  };
}

export type UsageStore = ReturnType<typeof createUsageStore>;
