import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';

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
 * Fixed-window request counters shared by every API process: one atomic upsert-and-increment
 * per request. Old windows are removed by comparing stored times, because FerretDB has no
 * TTL indexes.
 */
export function createRateLimitStore(conn: Connection) {
  const Windows: Model<RateWindow> = conn.model<RateWindow>('RateWindow', schema, 'rate_windows');
  let lastSweep = 0;

  return {
    /** Counts one request of `bucket` in the window starting at `windowStart`; returns the count so far. */
    async hit(bucket: string, windowStart: number, windowMs: number): Promise<number> {
      const doc = await Windows.findOneAndUpdate(
        { _id: `${bucket}:${windowStart}` },
        { $inc: { count: 1 }, $setOnInsert: { expiresAt: windowStart + windowMs } },
        { upsert: true, returnDocument: 'after' },
      )
        .lean<RateWindow>()
        .exec();
      const now = Date.now();
      if (now - lastSweep > windowMs) {
        lastSweep = now;
        Windows.deleteMany({ expiresAt: { $lt: now - windowMs } })
          .exec()
          .catch(() => undefined);
      }
      return doc?.count ?? 1;
    },
  };
}

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;
