// Who holds a piece of content, derived from the records themselves: every kind of record
// that can hold content (pin requests, files; later snapshots, IPNS targets, bucket objects)
// registers a `HolderKind` here (infra/db/index.ts), and nothing else in the sync machinery
// names a kind. There is no separate hold document or counter to keep in step.
//
// Why derived: every change is then the insert or delete (or status change) of the record
// itself, followed by a round that reads the holds fresh and makes IPFS Cluster match
// (core/hold-sync.ts; activities/holds.ts has the argument that this is race-free). A counter
// or holder array in one document cannot work on FerretDB 1.24: its updates are a read followed
// by a write with no lock between them, so concurrent `$inc`, `$addToSet` or `$pull` lose
// changes (measured here: 200 concurrent `$inc` counted 13).
import type { Model } from 'mongoose';
import { HELD_ROWS_PER_MULTIHASH } from '../constants.js';
import { batchedReads } from './batch.js';
import type { HolderRef } from '../temporal/contracts/holds.js';

export type { HolderRef };

/** What a holding record tells the sync machinery: a CID to pin the content by, and origins. */
export interface Held {
  cid: string;
  origins: string[];
}

/** A holding record as `holdersOf` finds it: also its ID, whose it is and, where the record
 * keeps one, when it came to hold the content (ms): which holder a pin names (core/hold-sync.ts). */
export type Holder = Held & { id: string; userId: string; at?: number };

/** One kind of record that holds content. Each store that has such records provides one. */
export interface HolderKind {
  /** The kind's name in `HolderRef`s and holder IDs (`<kind>:<id>`). */
  kind: string;
  /** Every record of this kind that holds the multihash. Used for decisions to unpin. */
  holdersOf(multihash: string): Promise<Holder[]>;
  /** The record with this `_id`, if it exists and holds its content. By `_id` alone. */
  holds(key: string): Promise<Holder | null>;
  /** A page of the content records of this kind hold, by multihash after `after`, each once,
   * with a CID to pin it by (the audit's walk: every kind has a {multihash} index). */
  heldPage(after: string, limit: number): Promise<{ multihash: string; cid: string }[]>;
  /** Which of these multihashes a record of this kind holds. */
  heldAmong(multihashes: string[]): Promise<Set<string>>;
  /** Whether a record of this kind other than `except` (a holder ID) holds the multihash: one
   * record read at most. */
  heldByOther(multihash: string, except?: string): Promise<boolean>;
}

/** `heldPage`, `heldAmong` and `heldByOther` of a kind whose holding records match `holding`
 * (`idField`: the field that is a holder's ID). */
export function heldQueries<T>(
  records: Model<T>,
  holding: Record<string, unknown> = {},
  idField = '_id',
): Pick<HolderKind, 'heldPage' | 'heldAmong' | 'heldByOther'> {
  type Row = { multihash: string; cid: string };
  const exists = async (multihash: string) => (await records.exists({ ...holding, multihash })) !== null;
  // Whether any record holds each multihash, for the reads that come together (a removal's round
  // asks every kind twice, an IPNS publish asks files of two targets: core/hold-sync.ts): one
  // `$in` query a batch instead of one `exists` a read. A query returns every matching row, so
  // it takes at most HELD_ROWS_PER_MULTIHASH rows each; when content held by many records fills
  // that, the multihashes it left out are asked one by one.
  const anyHolds = batchedReads(async (multihashes) => {
    const limit = multihashes.length * HELD_ROWS_PER_MULTIHASH;
    const rows = await records
      .find({ ...holding, multihash: { $in: multihashes } }, { _id: 0, multihash: 1 })
      .limit(limit)
      .lean<Pick<Row, 'multihash'>[]>()
      .exec();
    const held = new Map(rows.map((r) => [r.multihash, true]));
    if (rows.length === limit) await Promise.all(multihashes.map(async (m) => !held.has(m) && (await exists(m)) && held.set(m, true)));
    return held;
  });
  return {
    async heldPage(after, limit) {
      // Records of one content are adjacent in the index; a page ends where `limit` records
      // do, and the next starts past the last content, so each content comes once.
      const rows = await records
        .find({ ...holding, multihash: { $gt: after } }, { multihash: 1, cid: 1 })
        .sort({ multihash: 1 })
        .limit(limit)
        .lean<Row[]>()
        .exec();
      const page: Row[] = [];
      for (const row of rows) if (page.at(-1)?.multihash !== row.multihash) page.push({ multihash: row.multihash, cid: row.cid });
      return page;
    },
    async heldAmong(multihashes) {
      if (multihashes.length === 0) return new Set();
      const rows = await records
        .find({ ...holding, multihash: { $in: multihashes } }, { multihash: 1 })
        .lean<Row[]>()
        .exec();
      return new Set(rows.map((r) => r.multihash));
    },
    async heldByOther(multihash, except) {
      if (except === undefined) return (await anyHolds(multihash)) !== null;
      return (await records.exists({ ...holding, multihash, [idField]: { $ne: except } })) !== null;
    },
  };
}

/** The kind of record that holds its content for as long as it exists (files, snapshots):
 * its `_id` is the holder's ID, and it has the content's `cid` and `multihash`; `timeField`:
 * when it was written (ms). */
export function existenceHolder<T extends { _id: string; userId: string; cid: string; multihash: string }>(
  kind: string,
  records: Model<T>,
  timeField: keyof T & string,
): HolderKind {
  type Row = Pick<T, '_id' | 'userId' | 'cid' | 'multihash'> & Record<string, unknown>;
  // Every upload asks right after its pin (core/hold-sync.ts): those asked together are read
  // together (batch.ts).
  const exists = batchedReads(async (keys) => {
    const rows = await records
      .find({ _id: { $in: keys } }, { cid: 1, userId: 1 })
      .lean<Row[]>()
      .exec();
    return new Map(rows.map((r) => [r._id, { cid: r.cid, userId: r.userId }]));
  });
  return {
    kind,
    async holdersOf(multihash) {
      const rows = await records
        .find({ multihash }, { cid: 1, userId: 1, [timeField]: 1 })
        .lean<Row[]>()
        .exec();
      return rows.map((r) => ({ id: r._id, userId: r.userId, cid: r.cid, origins: [], at: r[timeField] as number | undefined }));
    },
    async holds(key) {
      const row = await exists(key);
      return row === null ? null : { id: key, userId: row.userId, cid: row.cid, origins: [] };
    },
    ...heldQueries(records),
  };
}

export interface Holds {
  /** Holders of the content, e.g. `pin:<requestId>`, `file:<fileId>`. */
  holders: string[];
  /** The users those holders belong to, each once. */
  users: string[];
  /** A CID to pin it by (the first holder's), when held. */
  cid?: string;
  /** Origins of every holder, for Cluster. */
  origins: string[];
  /** The holder written last (any one where none keeps a time), and whose it is: the one the
   * content's pin names. Absent when nobody holds it. */
  newest?: { holder: string; userId: string };
}

export function createHolds(kinds: HolderKind[]) {
  const byName = new Map(kinds.map((k) => [k.kind, k]));
  // Files hold most content: asked first where any one holder answers the question.
  const likelyFirst = [...kinds].sort((a, b) => Number(b.kind === 'file') - Number(a.kind === 'file'));
  return {
    kinds: [...byName.keys()],

    /** Every holder of the content, of every kind. */
    async of(multihash: string): Promise<Holds> {
      const found = await Promise.all(kinds.map(async (k) => (await k.holdersOf(multihash)).map((h) => ({ ...h, kind: k.kind }))));
      const all = found.flat();
      const newest = all.reduce<(typeof all)[number] | undefined>(
        (a, h) => (a && (a.at ?? -Infinity) >= (h.at ?? -Infinity) ? a : h),
        undefined,
      );
      return {
        holders: all.map((h) => `${h.kind}:${h.id}`),
        users: [...new Set(all.map((h) => h.userId))],
        cid: all[0]?.cid,
        origins: [...new Set(all.flatMap((h) => h.origins))],
        ...(newest ? { newest: { holder: `${newest.kind}:${newest.id}`, userId: newest.userId } } : {}),
      };
    },

    /** Whether this record exists and still holds its content (and whose it is). */
    async holds(ref: HolderRef): Promise<Holder | null> {
      const kind = byName.get(ref.kind);
      if (!kind) throw new Error(`unknown holder kind ${ref.kind}`);
      return kind.holds(ref.key);
    },

    /**
     * Whether any record but `self` holds the content (with `otherKinds`, any record of another
     * kind than `self`'s). The kinds are asked one after another, each for one record, files
     * first, until one has it: one small read when the content is an upload (an IPNS name's
     * target mostly is), where `of` reads every holder of every kind.
     */
    async heldByOthers(multihash: string, self: HolderRef, options: { otherKinds?: boolean } = {}): Promise<boolean> {
      for (const k of likelyFirst) {
        if (k.kind === self.kind && options.otherKinds) continue;
        if (await k.heldByOther(multihash, k.kind === self.kind ? self.key : undefined)) return true;
      }
      return false;
    },

    /** Whether any record holds the content: one record read at most per kind, the kinds at once
     * (what a sync round confirms after its pin or unpin, activities/holds.ts). */
    async isHeld(multihash: string): Promise<boolean> {
      return (await Promise.all(kinds.map((k) => k.heldByOther(multihash)))).some(Boolean);
    },

    /** Which of these multihashes any record holds. */
    async heldAmong(multihashes: string[]): Promise<Set<string>> {
      const found = await Promise.all(kinds.map((k) => k.heldAmong(multihashes)));
      return new Set(found.flatMap((set) => [...set]));
    },

    /** Every kind, for walking what each holds page by page. */
    all: kinds,
  };
}

export type HoldQueries = ReturnType<typeof createHolds>;
