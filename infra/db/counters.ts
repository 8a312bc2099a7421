// Counters under a limit: names per account, publishes per account and month. Taking one is
// a single conditional update (`n` below the limit, then +1), so concurrent requests never
// together pass the limit; a counter that does not exist yet is created at 0 first. A counter
// also hands out strictly increasing millisecond stamps (`stamp`).
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

interface CounterRecord {
  /** What is counted, e.g. `ipns-names:<userId>`. */
  _id: string;
  n: number;
}

const schema = new Schema<CounterRecord>(
  { _id: { type: String, required: true }, n: { type: Number, required: true } },
  { versionKey: false },
);

export function createCounterStore(conn: Connection) {
  const Counters: Model<CounterRecord> = conn.model<CounterRecord>('Counter', schema, 'counters');
  const attempt = (key: string, limit: number) =>
    Counters.findOneAndUpdate({ _id: key, n: { $lt: limit } }, { $inc: { n: 1 } })
      .lean()
      .exec();
  return {
    model: Counters,

    /** Counts one more unless that would pass `limit`; false when at the limit. */
    async take(key: string, limit: number): Promise<boolean> {
      if (await attempt(key, limit)) return true;
      try {
        await Counters.create({ _id: key, n: 0 });
      } catch (err) {
        // It exists: at the limit, or made a moment ago by a concurrent take.
        if (!isDuplicateKey(err)) throw err;
      }
      return (await attempt(key, limit)) !== null;
    },

    /** Counts one fewer (what was taken and not used, or a deleted name). */
    async give(key: string): Promise<void> {
      await Counters.updateOne({ _id: key, n: { $gt: 0 } }, { $inc: { n: -1 } }).exec();
    },

    /**
     * A time in milliseconds, `now` or just after, that no earlier stamp of `key` had: stamps of
     * one key strictly increase, so records stamped with them sort without ties (the pinning
     * service API pages by creation time alone). Each step is one conditional update.
     */
    async stamp(key: string, now: number): Promise<number> {
      for (;;) {
        if (
          await Counters.findOneAndUpdate({ _id: key, n: { $lt: now } }, { $set: { n: now } })
            .lean()
            .exec()
        )
          return now;
        const next = await Counters.findOneAndUpdate({ _id: key, n: { $gte: now } }, { $inc: { n: 1 } }, { returnDocument: 'after' })
          .lean<CounterRecord>()
          .exec();
        if (next) return next.n;
        try {
          await Counters.create({ _id: key, n: now });
          return now;
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
      }
    },

    /** Sets the count to `to` if it is still `from` (the audit's repair): false when it moved. */
    async setIf(key: string, from: number, to: number): Promise<boolean> {
      return (await Counters.updateOne({ _id: key, n: from }, { $set: { n: to } }).exec()).modifiedCount === 1;
    },

    async get(key: string): Promise<number> {
      return (await Counters.findById(key).lean<CounterRecord>().exec())?.n ?? 0;
    },
  };
}

export type CounterStore = ReturnType<typeof createCounterStore>;
