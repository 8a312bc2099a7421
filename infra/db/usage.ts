// Storage use per user, counted over DISTINCT content: content a user holds twice (uploaded as
// a file and also pinned) counts once. No request sums records: a counter per user, adjusted
// by single-document atomic updates, also makes the quota one conditional update, so
// concurrent uploads of an account neither pass it together nor wait for each other.
//
// Two collections:
// - `usage`, one document per user (`_id` = userId): `used`, the bytes of the distinct
//   content the user holds (what the quota limits); `files` and `pinned`, the bytes of the
//   content held by a file record / by a pinned pin request (each counted once per content;
//   their sum exceeds `used` by what is held both ways); `distinct: true` once the user is
//   counted this way.
// - `usage_holds`, one document per user and content, at the key the user's pin request of
//   that content has too (`<userId>:<multihash>`, by-id.ts): `file`, `pin` and `object`, how
//   many records of each kind hold it (any number of files, at most one pin request, once
//   writes settle), and `size`, the
//   content's bytes (the largest any holder reported: a pin whose size Kubo could not tell
//   reports 0).
//
// The rule that keeps `used` exact: a holding document counts `size` when `file > 0 || pin >
// 0`, else 0; every change of it is one atomic findOneAndUpdate that returns the document as
// it was, and the caller adjusts the user's counters by exactly what that update changed
// (after − before, the "after" computed from the "before" and the update). `used` therefore
// moves by +size only on the update that took the content from held by none to held by some,
// and by −size only on the one that took it back: a second holder, or the second of two
// concurrent deletes, changes nothing. The counts are increments (+1 when a record starts to
// hold, −1 when it stops), not flags: a record's write and its count's change are two
// documents, and increments commute, so an upload and a delete of one file interleaving
// between their two writes still leave the counts equal to the records (a −1 landing before
// its +1 passes through −1, which holds nothing, and ends at 0).
//
// Holding documents are not deleted by writers, only brought to 0 (then they weigh nothing): on
// the stack's FerretDB only updates are serialised, so a conditional delete could remove a
// document that a concurrent +1 had just changed. There is one per user and content ever held,
// until a rebuild (below), which runs while no writer of that user does, writes them anew.
//
// The quota: an upload reserves what holding it as a file would add with one conditional
// update of `used` (`reserve`: the whole size first, and only if that does not fit what the
// holding document says it adds, nothing when the user pins it already or uploaded it before:
// core/content.ts `reserveHolding`; the whole size counts in `files` too), writes its
// file record, and settles the reservation with the holding update's actual change (`hold(…,
// reserved)`: nothing left to write when the content was new, the common case). The reads and
// writes of many uploads at once are group-committed (usage-batch.ts). A pin is counted
// when it becomes `pinned` (activities/pins.ts), unconditionally, as before this design. The
// one gap, also as before: content whose other hold is removed between the read and the
// update is counted without a quota check, so `used` can pass the quota by that content's
// size (never by concurrent new content). A process that dies between a record write and its
// holding update leaves both off by that record: such writes are logged first, naming the user
// (infra/db/hold-changes.ts), and the sweep recounts a user whose holding of a logged content
// differs from the records (activities/counts.ts, `recount`, safe beside the user's traffic);
// the audit compares every user (`compare`) and its repair recounts too.
//
// Users counted before (no document, or one without `distinct`) are rebuilt once from their
// records (`ensure`), under a lock that every writer of that user meets first: whoever
// changes a user's records calls `ensure` before (`reserve` and `used` do it themselves), so
// no record changes while its holding documents are rebuilt.
//
// Each operation finds its documents by `_id` (or the {userId} index, for a rebuild), and each
// update is atomic: on a MongoDB by itself, on the local stack's FerretDB through its patches
// (stack/patches/ferretdb/0003 serialises read-modify-write commands per collection;
// tests/usage.test.ts races 20 uploads, tests/analytics.test.ts holds one content both ways).
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import {
  USAGE_MEMORY_MS,
  USAGE_REBUILD_LOCK_MS,
  USAGE_REBUILD_WAIT_MS,
  USAGE_RECOUNT_LOOK_MS,
  USAGE_RECOUNT_QUIET_MS,
  USAGE_RECOUNT_SETTLE_MS,
  USAGE_TALLY_PAGE,
} from '../constants.js';
import { userContentKey } from './by-id.js';
import { isDuplicateKey } from './errors.js';
import type { LockStore } from './locks.js';
import { BYTES } from './bytes.js';
import { createUsageBatches } from './usage-batch.js';
import { contentPages, totalOf, type UserRecords } from './usage-tally.js';
import { count } from './count.js';
import {
  difference,
  lessReserved,
  NOTHING_RESERVED,
  stepped,
  weigh,
  type HoldKind,
  type HoldRecord,
  type Reserved,
  type UsageChange,
  type UsageRecord,
  type Weight,
} from './usage-records.js';

export type { HoldKind, HoldRecord, Reserved, UsageChange, UsageRecord, Weight } from './usage-records.js';
export { firstHold } from './usage-records.js';

/** What the users' records hold (of these contents, with `multihashes`), one entry per record. */
export type HoldsFromRecords = (
  userIds: string[],
  multihashes?: string[],
) => Promise<{ kind: HoldKind; userId: string; multihash: string; size: number }[]>;

const usageSchema = new Schema<UsageRecord>(
  {
    _id: { type: String, required: true },
    // Doubles (BYTES): FerretDB 1.24 wraps an int32 field's `$inc` past 2^31.
    files: { type: BYTES, required: true },
    pinned: { type: BYTES, required: true },
    used: { type: BYTES, required: true },
    distinct: { type: Boolean },
  },
  { versionKey: false },
);

const holdSchema = new Schema<HoldRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    file: { type: Number, required: true },
    pin: { type: Number, required: true },
    object: { type: Number },
    size: { type: BYTES, required: true },
    settling: { type: Number },
  },
  { versionKey: false },
);
holdSchema.index({ userId: 1 });

/** A holding document that counts something (or is mid-step). */
const WEIGHING = [{ file: { $ne: 0 } }, { pin: { $ne: 0 } }, { object: { $nin: [0, null] } }, { settling: { $nin: [0, null] } }];

export function createUsageStore(conn: Connection, locks: LockStore, holdsFromRecords: HoldsFromRecords, records: UserRecords) {
  const Usage: Model<UsageRecord> = conn.model<UsageRecord>('Usage', usageSchema, 'usage');
  const Holds: Model<HoldRecord> = conn.model<HoldRecord>('UsageHold', holdSchema, 'usage_holds');

  // Read with the batch of counter reads that arrive together (each starts after it was asked).
  const counted = async (userId: string) => (await batches.counter(userId))?.distinct === true;

  /**
   * Rebuilds the user's holding documents and counters from the records, a page of contents at
   * a time (usage-tally.ts). Callers hold the user's lock, and no writer runs: every writer
   * waits in `ensure` (`recount` first waits for the writers that passed it).
   */
  async function rebuild(userId: string, renew: () => Promise<void>): Promise<Weight> {
    const total: Weight = { files: 0, pinned: 0, used: 0 };
    // Written anew: deleted, then inserted a page at a time, which FerretDB does several times
    // faster than an upsert each (measured: about 500 upserts a second). Safe here alone: no
    // writer of the user's holdings runs during a rebuild (see above). Content no record holds
    // any more (left by a process that died mid-change) keeps no document.
    await Holds.deleteMany({ userId }).exec();
    for await (const page of contentPages(records, userId, USAGE_TALLY_PAGE)) {
      // A user of a million contents takes longer than the lock's time: each page keeps it.
      await renew();
      if (page.counted.size > 0)
        await Holds.insertMany(
          [...page.counted].map(([_id, doc]) => ({ _id, userId, file: 0, pin: 0, object: 0, size: 0, ...doc, settling: 0 })),
          { ordered: false },
        );
      const w = totalOf(page.counted);
      total.files += w.files;
      total.pinned += w.pinned;
      total.used += w.used;
    }
    await Usage.updateOne({ _id: userId }, { $set: { ...total, distinct: true } }, { upsert: true }).exec();
    return total;
  }

  const withUserLock = <T>(userId: string, fn: (renew: () => Promise<void>) => Promise<T>) =>
    locks.withLock(`usage:${userId}`, fn, { ttlMs: USAGE_REBUILD_LOCK_MS, waitMs: USAGE_REBUILD_WAIT_MS });

  /**
   * Makes sure the user is counted over distinct content. A user from before (no document, or
   * one without `distinct`) is rebuilt from the records, once: under the user's lock, checked
   * again inside it, so of many requests that find it missing one rebuilds and the others wait.
   * Exact because every writer of records calls this before its write (see the top).
   */
  async function ensure(userId: string): Promise<void> {
    if (await counted(userId)) return;
    await withUserLock(userId, async (renew) => {
      if (!(await counted(userId))) await rebuild(userId, renew);
    });
  }

  /** Applies a change to the user's counters. */
  async function add(userId: string, change: UsageChange): Promise<void> {
    const files = change.files ?? 0;
    const pinned = change.pinned ?? 0;
    const used = change.used ?? files + pinned;
    if (files === 0 && pinned === 0 && used === 0) return;
    await Usage.updateOne({ _id: userId }, { $inc: { files, pinned, used } }).exec();
  }

  /**
   * One atomic step of the user's holding document of the content: `step` records of `kind`
   * start (+1) or stop (−1) holding it. The user's counters move by what that changed, less
   * what the reservation counted already. Returns what it changed.
   *
   * The counters are a second document, written after: `settling` is raised with the step and
   * lowered once the counters are written, so a process that dies between the two leaves a
   * holding document that says so (measured by npm run chaos: a worker killed there left a
   * pin counted in its holding and not in the counters, which no recount of the holding alone
   * can see). The sweep and the audit recount a user whose holding stays settling.
   */
  async function step(userId: string, multihash: string, kind: HoldKind, by: 1 | -1, size: number, reserved: Reserved): Promise<Weight> {
    const _id = userContentKey(userId, multihash);
    const update = {
      $inc: { file: kind === 'file' ? by : 0, pin: kind === 'pin' ? by : 0, object: kind === 'object' ? by : 0, settling: 1 },
      // Only a holder that starts may raise the size; $max also creates the field at 0.
      $max: { size: by > 0 ? size : 0 },
      $setOnInsert: { userId },
    };
    // No projection: FerretDB 1.24 refuses findAndModify's `fields`.
    const write = () => Holds.findOneAndUpdate({ _id }, update, { upsert: true, returnDocument: 'before' }).lean<HoldRecord>().exec();
    let before: HoldRecord | null;
    try {
      before = await write();
    } catch (err) {
      // Two first holds racing: the other inserted it, so this one is an update (files.ts).
      if (!isDuplicateKey(err)) throw err;
      before = await write();
    }
    const changed = difference(weigh(stepped(before, kind, by, by > 0 ? size : 0)), weigh(before));
    await add(userId, lessReserved(changed, reserved));
    await Holds.updateOne({ _id }, { $inc: { settling: -1 } }).exec();
    return changed;
  }

  /** One reservation by itself (see `reserve`): `used` after it, or null when it does not fit. */
  async function reserveOne(userId: string, bytes: number, limit: number, files: number): Promise<number | null> {
    const attempt = async () => {
      const before = await Usage.findOneAndUpdate(
        { _id: userId, distinct: true, used: { $lte: limit - bytes } },
        { $inc: { used: bytes, files } },
      )
        .lean<UsageRecord>()
        .exec();
      return before && before.used + bytes;
    };
    const after = await attempt();
    if (after !== null) return after;
    // No match: over the limit, or a user still to be rebuilt.
    if (await counted(userId)) return null;
    await ensure(userId);
    return attempt();
  }

  // What `used` read last, per user (`usedLately`).
  const lately = new Map<string, { used: number; at: number }>();

  // The writes of uploads, S3 puts and pins, group-committed (usage-batch.ts).
  const batches = createUsageBatches({
    Usage,
    Holds,
    reserveOne,
    step,
    add,
  });

  return {
    model: Usage,
    holds: Holds,
    ensure,
    add,

    /** A new user holds nothing yet: counted from zero, never rebuilt. */
    async init(userId: string): Promise<void> {
      try {
        await Usage.create({ _id: userId, files: 0, pinned: 0, used: 0, distinct: true });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    },

    /** Bytes of the distinct content the user holds now. Concurrent reads (many small uploads
     * at once) share a database read (usage-batch.ts); each starts after it was asked. */
    async used(userId: string): Promise<number> {
      const asked = Date.now();
      let row = await batches.counter(userId);
      if (!row?.distinct) {
        await ensure(userId);
        row = await batches.counter(userId);
      }
      if (lately.size >= 10_000) lately.clear(); // a bound, not an eviction policy
      lately.set(userId, { used: row?.used ?? 0, at: asked });
      return row?.used ?? 0;
    },

    /** `used` as this process last read it, if that read was asked for within USAGE_MEMORY_MS. */
    usedLately(userId: string): number | undefined {
      const read = lately.get(userId);
      return read && Date.now() - read.at < USAGE_MEMORY_MS ? read.used : undefined;
    },

    /**
     * Adds `bytes` to `used` (and `files` to `files`: a new file's weight there, counted ahead
     * so that its holding step finds nothing left to write) if `used` stays within `limit`, in
     * one conditional update: concurrent reservations can never together pass the limit, and
     * none waits for another. Answers `used` just after it, or null when it does not fit.
     * Settled by `hold` (or given back with `add`).
     */
    reserve: (userId: string, bytes: number, limit: number, files = 0): Promise<number | null> =>
      batches.reserve(userId, bytes, limit, files),

    /**
     * For each user and content, whether the user's holding document counts the records that
     * hold it now (the sweep's check of logged changes, activities/counts.ts): four queries by
     * index for the lot.
     */
    async holdingsAgree(pairs: { userId: string; multihash: string }[]): Promise<boolean[]> {
      if (pairs.length === 0) return [];
      const ids = pairs.map((p) => userContentKey(p.userId, p.multihash));
      const [docs, records] = await Promise.all([
        Holds.find({ _id: { $in: [...new Set(ids)] } })
          .lean<HoldRecord[]>()
          .exec(),
        holdsFromRecords([...new Set(pairs.map((p) => p.userId))], [...new Set(pairs.map((p) => p.multihash))]),
      ]);
      const stored = new Map(docs.map((d) => [d._id, d]));
      const counted = new Map<string, Partial<HoldRecord>>();
      for (const r of records) {
        const id = userContentKey(r.userId, r.multihash);
        counted.set(id, stepped(counted.get(id) ?? null, r.kind, 1, r.size));
      }
      return ids.map((id) => {
        const doc = stored.get(id);
        return (
          (doc?.settling ?? 0) === 0 && (['file', 'pin', 'object'] as const).every((k) => (doc?.[k] ?? 0) === (counted.get(id)?.[k] ?? 0))
        );
      });
    },

    /** How many records of each kind the user's holding document of the content counts. */
    holding: (userId: string, multihash: string) => Holds.findById(userContentKey(userId, multihash)).lean<HoldRecord>().exec(),

    /** Bytes that holding the content as `kind` (of `size` bytes) would add to `used` now: 0
     * when the user holds it already. A read, for a reservation; `hold` counts what happens. */
    async cost(userId: string, multihash: string, kind: HoldKind, size: number): Promise<number> {
      const before = await batches.holding(userId, multihash);
      return difference(weigh(stepped(before, kind, 1, size)), weigh(before)).used;
    },

    /** A record of `kind` started holding the content: counted, less what was reserved for it. */
    hold: (userId: string, multihash: string, kind: HoldKind, size: number, reserved: Reserved = NOTHING_RESERVED) =>
      batches.hold(userId, multihash, kind, size, reserved),

    /** A record of `kind` stopped holding the content (whoever removed the record, only they). */
    release: (userId: string, multihash: string, kind: HoldKind) => step(userId, multihash, kind, -1, 0, NOTHING_RESERVED),

    /** The user's counters as stored, and as the records count them (the audit compares them;
     * null: a user counted before `distinct`, rebuilt at their next write). Writes nothing. */
    async compare(userId: string): Promise<{ stored: Weight; fromRecords: Weight; holdingsOff: number } | null> {
      const stored = await Usage.findById(userId, { files: 1, pinned: 1, used: 1, distinct: 1 }).lean<UsageRecord>().exec();
      if (!stored?.distinct) return null;
      // The holding documents too: one that counts a record too few can leave the counters right
      // today and wrong after the next change of that content.
      const total: Weight = { files: 0, pinned: 0, used: 0 };
      let holdingsOff = 0;
      let weighingSeen = 0;
      const counts = (d: Partial<HoldRecord> | undefined) => [d?.file ?? 0, d?.pin ?? 0, d?.object ?? 0].join();
      const weighs = (d: Partial<HoldRecord>) =>
        (d.file ?? 0) !== 0 || (d.pin ?? 0) !== 0 || (d.object ?? 0) !== 0 || (d.settling ?? 0) !== 0;
      for await (const page of contentPages(records, userId, USAGE_TALLY_PAGE)) {
        const w = totalOf(page.counted);
        total.files += w.files;
        total.pinned += w.pinned;
        total.used += w.used;
        // The page's documents by `_id` (FerretDB serves `$in` on `_id` from its index; a range
        // on `_id` it would answer by reading the whole collection).
        const docs = await Holds.find({ _id: { $in: [...page.counted.keys()] } }, { file: 1, pin: 1, object: 1, settling: 1 })
          .lean<HoldRecord[]>()
          .exec();
        for (const doc of docs) {
          if (counts(doc) !== counts(page.counted.get(doc._id)) || (doc.settling ?? 0) !== 0) holdingsOff++;
          if (weighs(doc)) weighingSeen++;
          page.counted.delete(doc._id);
        }
        holdingsOff += page.counted.size; // held by records, with no holding document at all
      }
      // Documents that count records of content no record holds any more: those of the user that
      // count something, less the ones the pages saw (one count, by the {userId} index).
      holdingsOff += (await count(Holds, { userId, $or: WEIGHING })) - weighingSeen;
      const fromRecords = total;
      return { stored: { files: stored.files, pinned: stored.pinned, used: stored.used }, fromRecords, holdingsOff };
    },

    /**
     * Recomputes the user's holding documents and counters from the records, beside the user's
     * traffic (the audit's repair, and `usage recount`). Under the user's lock it first marks
     * the user uncounted: from then on every writer of the user's records waits in `ensure`
     * (a reservation's condition fails on it too). Writers that passed `ensure` before finish
     * within USAGE_RECOUNT_SETTLE_MS, and within moments while MongoDB answers: the wait ends
     * once the user's counters have stood still for USAGE_RECOUNT_QUIET_MS, or after the settle
     * time. Then no record or holding document moves while they are counted. `beat` is called while it waits (an activity's heartbeat).
     */
    async recount(userId: string, beat: () => void = () => undefined): Promise<UsageRecord> {
      const total = await withUserLock(userId, async (renew) => {
        await Usage.updateOne({ _id: userId }, { $set: { distinct: false } }).exec();
        // The writers that passed `ensure` move the counters once more each and are done; with
        // MongoDB answering that takes milliseconds, so the counters standing still for
        // USAGE_RECOUNT_QUIET_MS ends the wait. Before, it was always the whole settle time, and
        // every request of the user waited that long (npm run chaos saw them hang 30 s after each
        // recount the sweep asked for).
        const started = Date.now();
        let seen = '';
        let stillSince = started;
        while (Date.now() < started + USAGE_RECOUNT_SETTLE_MS && Date.now() < stillSince + USAGE_RECOUNT_QUIET_MS) {
          beat();
          await new Promise((resolve) => setTimeout(resolve, USAGE_RECOUNT_LOOK_MS));
          const now = await Usage.findById(userId, { used: 1, files: 1, pinned: 1 }).lean().exec();
          const counters = JSON.stringify([now?.used, now?.files, now?.pinned]);
          if (counters !== seen) [seen, stillSince] = [counters, Date.now()];
        }
        return rebuild(userId, renew);
      });
      return { _id: userId, ...total, distinct: true };
    },
  };
}

export type UsageStore = ReturnType<typeof createUsageStore>;
