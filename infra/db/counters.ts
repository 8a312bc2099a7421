// Counters under a limit: names per account, publishes per account and month. Taking is a
// conditional update (`n` at most the limit less what is taken, then + that), so concurrent
// requests never together pass the limit; a counter that does not exist yet is created at 0
// first. Takes that come together share their update (batch.ts): k takes of one counter are
// one `$inc` of k while k fit, as a publish a second per lane of one account otherwise costs a
// write each. A counter also hands out strictly increasing millisecond stamps (`stamp`).
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { groupCommit } from './batch.js';
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
  const add = (filter: object, k: number) =>
    Counters.findOneAndUpdate(filter, { $inc: { n: k } })
      .lean<CounterRecord>()
      .exec();

  /** Counts up to `k` more without passing `limit`: how many it counted. */
  async function takeUpTo(key: string, limit: number, k: number): Promise<number> {
    for (;;) {
      if (await add({ _id: key, n: { $lte: limit - k } }, k)) return k;
      const current = await Counters.findById(key).lean<CounterRecord>().exec();
      if (!current) {
        try {
          await Counters.create({ _id: key, n: 0 });
        } catch (err) {
          // Made a moment ago by a concurrent take.
          if (!isDuplicateKey(err)) throw err;
        }
        continue;
      }
      const free = limit - current.n;
      if (free <= 0) return 0;
      // Room for some: those, if the count is still what was read. Else (or if room for all came
      // meanwhile) again: each round that goes again saw another process's take or give.
      if (free < k && (await add({ _id: key, n: current.n }, free))) return free;
    }
  }

  const takeTogether = groupCommit(async (takes: { key: string; limit: number }[]) => {
    const groups = new Map<string, number[]>();
    takes.forEach(({ key, limit }, i) => {
      const id = `${limit}:${key}`;
      const group = groups.get(id);
      if (group) group.push(i);
      else groups.set(id, [i]);
    });
    const results: (boolean | Error)[] = [];
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const { key, limit } = takes[indexes[0]!]!;
        try {
          const taken = await takeUpTo(key, limit, indexes.length);
          indexes.forEach((i, nth) => (results[i] = nth < taken));
        } catch (err) {
          for (const i of indexes) results[i] = err as Error;
        }
      }),
    );
    return results;
  });

  return {
    model: Counters,

    /** Counts one more unless that would pass `limit`; false when at the limit. */
    take: (key: string, limit: number): Promise<boolean> => takeTogether({ key, limit }),

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
