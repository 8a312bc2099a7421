// The usage writes that every upload, S3 PutObject and pin makes, group-committed (batch.ts):
// the same rules as one write each (usage.ts explains them), in a few commands per batch.
//
// - Reads of holding documents and of counters: one `$in` query per batch.
// - Reservations: the batch's reservations of one user as one conditional update of their sum;
//   when the sum does not fit, each is tried alone, in order, as before. So the quota stays
//   exact: of 500 uploads that fit 250 at once, 250 are reserved.
// - Holding steps that start a holder: the batch's new holding documents in one unordered
//   insert. A document that was inserted had no "before": the content was held by none, so its
//   step adds the content's weight, as the atomic update would have said. What its reservation
//   did not count already (nothing, for a new file or object reserved whole) then moves the
//   users' counters (one update per user), and only those documents are inserted `settling`
//   and brought down after, in one update. A step whose document exists already (the user held
//   the content before, or two steps of one content in one batch) is the single atomic step of
//   usage.ts.
import type { Model } from 'mongoose';
import { groupCommit, insertUnordered, type Outcome } from './batch.js';
import { userContentKey } from './by-id.js';
import {
  firstHold,
  lessReserved,
  type HoldKind,
  type HoldRecord,
  type Reserved,
  type UsageChange,
  type UsageRecord,
  type Weight,
} from './usage-records.js';

interface Parts {
  Usage: Model<UsageRecord>;
  Holds: Model<HoldRecord>;
  /** One reservation by itself (usage.ts `reserve`, with its rebuild of an uncounted user). */
  reserveOne(userId: string, bytes: number, limit: number, files: number): Promise<number | null>;
  /** One atomic holding step by itself (usage.ts `step`). */
  step(userId: string, multihash: string, kind: HoldKind, by: 1, size: number, reserved: Reserved): Promise<Weight>;
  add(userId: string, change: UsageChange): Promise<void>;
}

interface Reservation {
  userId: string;
  bytes: number;
  limit: number;
  files: number;
}

interface Step {
  userId: string;
  multihash: string;
  kind: HoldKind;
  size: number;
  reserved: Reserved;
}

export function createUsageBatches(parts: Parts) {
  const { Usage, Holds } = parts;

  const counter = groupCommit(async (ids: string[]) => {
    const rows = await Usage.find({ _id: { $in: [...new Set(ids)] } }, { used: 1, distinct: 1 })
      .lean<Pick<UsageRecord, '_id' | 'used' | 'distinct'>[]>()
      .exec();
    const found = new Map(rows.map((r) => [r._id, r]));
    return ids.map((id) => found.get(id) ?? null);
  });

  const holding = groupCommit(async (ids: string[]) => {
    const rows = await Holds.find({ _id: { $in: [...new Set(ids)] } })
      .lean<HoldRecord[]>()
      .exec();
    const found = new Map(rows.map((r) => [r._id, r]));
    return ids.map((id) => found.get(id) ?? null);
  });

  const reserve = groupCommit(async (entries: Reservation[]) => {
    const results: Outcome<number | null>[] = [];
    const byUser = new Map<string, number[]>();
    entries.forEach((e, i) => byUser.set(`${e.userId} ${e.limit}`, [...(byUser.get(`${e.userId} ${e.limit}`) ?? []), i]));
    await Promise.all(
      [...byUser.values()].map(async (indexes) => {
        const { userId, limit } = entries[indexes[0]!]!;
        const sum = indexes.reduce((s, i) => s + entries[i]!.bytes, 0);
        const files = indexes.reduce((s, i) => s + entries[i]!.files, 0);
        if (indexes.length > 1) {
          const before = await Usage.findOneAndUpdate(
            { _id: userId, distinct: true, used: { $lte: limit - sum } },
            { $inc: { used: sum, files } },
          )
            .lean<UsageRecord>()
            .exec()
            .catch((err: Error) => err);
          if (before instanceof Error) return indexes.forEach((i) => (results[i] = before));
          if (before) {
            // Each one's `used` after it: as if they had come one after another, in order.
            let used = before.used;
            return indexes.forEach((i) => (results[i] = used += entries[i]!.bytes));
          }
        }
        for (const i of indexes)
          results[i] = await parts.reserveOne(userId, entries[i]!.bytes, limit, entries[i]!.files).catch((err: Error) => err);
      }),
    );
    return results;
  });

  const hold = groupCommit(async (entries: Step[]) => {
    const results: Outcome<Weight>[] = [];
    const ids = entries.map((e) => userContentKey(e.userId, e.multihash));
    // The first step of each document in the batch may insert it; any other steps alone.
    const first = new Map<string, number>();
    ids.forEach((id, i) => first.has(id) || first.set(id, i));
    const inserting = [...first.values()];
    // What an inserted document's step leaves for the counters: its weight less what was reserved.
    const left = (i: number): Weight => lessReserved(firstHold(entries[i]!.kind, entries[i]!.size), entries[i]!.reserved);
    const owes = (w: Weight) => w.files !== 0 || w.pinned !== 0 || w.used !== 0;
    const docs = inserting.map((i) => {
      const e = entries[i]!;
      return {
        _id: ids[i]!,
        userId: e.userId,
        file: e.kind === 'file' ? 1 : 0,
        pin: e.kind === 'pin' ? 1 : 0,
        object: e.kind === 'object' ? 1 : 0,
        size: e.size,
        settling: owes(left(i)) ? 1 : 0,
      };
    });
    // A connection that closes under this insert fails every step of the batch. A step sent
    // again by its request (core/content.ts, completing) may then meet its own document
    // and count a second holder; that document's `settling` is never brought down, so the sweep
    // recounts the user (activities/counts.ts).
    const inserted = await insertUnordered(Holds, docs);
    const alone: number[] = entries.map((_, i) => i).filter((i) => first.get(ids[i]!) !== i);
    const settled: number[] = [];
    const byUser = new Map<string, { change: Weight; indexes: number[] }>();
    inserted.forEach((outcome, n) => {
      const i = inserting[n]!;
      if (outcome === 'duplicate') return void alone.push(i);
      if (outcome instanceof Error) return void (results[i] = outcome);
      const e = entries[i]!;
      results[i] = firstHold(e.kind, e.size);
      const owed = left(i);
      if (!owes(owed)) return;
      settled.push(i);
      const sum = byUser.get(e.userId) ?? { change: { files: 0, pinned: 0, used: 0 }, indexes: [] };
      sum.change.files += owed.files;
      sum.change.pinned += owed.pinned;
      sum.change.used += owed.used;
      sum.indexes.push(i);
      byUser.set(e.userId, sum);
    });
    await Promise.all(
      [...byUser].map(([userId, { change, indexes }]) =>
        parts.add(userId, change).catch((err: Error) => indexes.forEach((i) => (results[i] = err))),
      ),
    );
    // A document whose counters failed stays settling, and so does every one of the batch if
    // this update fails (the steps happened, so their callers are not told otherwise): the
    // sweep recounts those users (activities/counts.ts).
    const done = settled.filter((i) => !(results[i] instanceof Error)).map((i) => ids[i]!);
    if (done.length > 0)
      await Holds.updateMany({ _id: { $in: done } }, { $inc: { settling: -1 } })
        .exec()
        .catch(() => undefined);
    for (const i of alone.sort((a, b) => a - b)) {
      const e = entries[i]!;
      results[i] = await parts.step(e.userId, e.multihash, e.kind, 1, e.size, e.reserved).catch((err: Error) => err);
    }
    return results;
  });

  return {
    counter,
    holding: (userId: string, multihash: string) => holding(userContentKey(userId, multihash)),
    reserve: (userId: string, bytes: number, limit: number, files: number) => reserve({ userId, bytes, limit, files }),
    hold: (userId: string, multihash: string, kind: HoldKind, size: number, reserved: Reserved) =>
      hold({ userId, multihash, kind, size, reserved }),
  };
}
