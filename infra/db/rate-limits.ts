import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

interface RateWindow {
  /** `<bucket>:<window start ms>` */
  _id: string;
  count: number;
  expiresAt: number;
}

const schema = new Schema<RateWindow>(
  {
    _id: { type: String, required: true },
    count: { type: Number, required: true },
    expiresAt: { type: Number, required: true, index: true },
  },
  { versionKey: false },
);

/**
 * Fixed-window request counters shared by every API process: one upsert-and-increment per
 * request. Old windows are removed by comparing stored times, because FerretDB has no TTL
 * indexes. FerretDB 1.24 can lose concurrent increments of one document (its updates are a
 * read then a write), so each process also counts its own requests exactly and the larger of
 * the two counts decides: exact for one API process, and never below any single process's
 * count for several. On MongoDB the shared count is exact.
 */
export function createRateLimitStore(conn: Connection) {
  const Windows: Model<RateWindow> = conn.model<RateWindow>('RateWindow', schema, 'rate_windows');
  let lastSweep = 0;
  const local = new Map<string, number>();

  return {
    /** Counts one request of `bucket` in the window starting at `windowStart`; returns the count so far. */
    async hit(bucket: string, windowStart: number, windowMs: number): Promise<number> {
      const id = `${bucket}:${windowStart}`;
      const mine = (local.get(id) ?? 0) + 1;
      local.set(id, mine);
      const increment = () =>
        Windows.findOneAndUpdate(
          { _id: id },
          { $inc: { count: 1 }, $setOnInsert: { expiresAt: windowStart + windowMs } },
          { upsert: true, returnDocument: 'after' },
        )
          .lean<RateWindow>()
          .exec();
      // Two first requests of a window may both try to insert it; the loser increments.
      const doc = await increment().catch((err) => {
        if (isDuplicateKey(err)) return increment();
        throw err;
      });
      const now = Date.now();
      if (now - lastSweep > windowMs) {
        lastSweep = now;
        for (const key of local.keys()) if (!key.endsWith(`:${windowStart}`)) local.delete(key);
        Windows.deleteMany({ expiresAt: { $lt: now - windowMs } })
          .exec()
          .catch(() => undefined);
      }
      return Math.max(doc?.count ?? 1, mine);
    },
  };
}

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;
