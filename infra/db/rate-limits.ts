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

/** How often a process adds its counted requests to the shared counters. */
const FLUSH_MS = 250;

/**
 * Fixed-window request counters shared by every API process. A request costs no database
 * write: each process counts its own requests exactly, reads the shared count once per key
 * and window, and adds its counts to the shared document every 250 ms (upsert with `$inc`),
 * learning the others' counts back. A request is refused when the larger of its process's
 * exact count and the shared count plus what this process has not yet added is over the
 * limit: exact for one process, at most 250 ms of the others' requests behind for several.
 * (It also sidesteps FerretDB 1.24 losing concurrent `$inc` on one document: at most one
 * flush per process is in flight.) Old windows are removed by comparing stored times, as
 * FerretDB has no TTL indexes.
 */
export function createRateLimitStore(conn: Connection) {
  const Windows: Model<RateWindow> = conn.model<RateWindow>('RateWindow', schema, 'rate_windows');
  const mine = new Map<string, number>(); // this process's requests, per window
  const unflushed = new Map<string, number>(); // of which not yet added to the shared count
  const shared = new Map<string, number>(); // shared count as last read
  const expiry = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let lastSweep = 0;

  async function add(id: string, n: number, expiresAt: number): Promise<number> {
    const inc = () =>
      Windows.findOneAndUpdate({ _id: id }, { $inc: { count: n }, $setOnInsert: { expiresAt } }, { upsert: true, returnDocument: 'after' })
        .lean<RateWindow>()
        .exec();
    // Two processes may insert the same window at once; the loser increments.
    const doc = await inc().catch((err) => {
      if (isDuplicateKey(err)) return inc();
      throw err;
    });
    return doc?.count ?? n;
  }

  async function flush(): Promise<void> {
    timer = undefined;
    const batch = [...unflushed];
    unflushed.clear();
    await Promise.all(batch.map(async ([id, n]) => shared.set(id, await add(id, n, expiry.get(id)!)))).catch(() => {
      for (const [id, n] of batch) unflushed.set(id, (unflushed.get(id) ?? 0) + n);
    });
    const now = Date.now();
    for (const [id, at] of expiry) if (at < now) [mine, unflushed, shared, expiry].forEach((m) => m.delete(id));
    if (now - lastSweep > 60_000) {
      lastSweep = now;
      Windows.deleteMany({ expiresAt: { $lt: now } })
        .exec()
        .catch(() => undefined);
    }
  }

  return {
    /** Counts one request of `bucket` in the window starting at `windowStart`; returns the count so far. */
    async hit(bucket: string, windowStart: number, windowMs: number): Promise<number> {
      const id = `${bucket}:${windowStart}`;
      if (!shared.has(id)) {
        expiry.set(id, windowStart + windowMs);
        shared.set(id, 0);
        const doc = await Windows.findById(id).lean<RateWindow>().exec();
        shared.set(id, Math.max(shared.get(id) ?? 0, doc?.count ?? 0));
      }
      const count = (mine.get(id) ?? 0) + 1;
      mine.set(id, count);
      unflushed.set(id, (unflushed.get(id) ?? 0) + 1);
      timer ??= setTimeout(() => void flush(), FLUSH_MS).unref();
      return Math.max(count, shared.get(id)! + unflushed.get(id)!);
    },

    /** Adds what this process counted to the shared counters now (shutdown, tests). */
    async flush(): Promise<void> {
      if (timer) clearTimeout(timer);
      await flush();
    },
  };
}

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;
