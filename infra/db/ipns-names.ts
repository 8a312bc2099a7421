// IPNS names: the key (sealed), the target and the sequence of the current record, and how
// republishing goes. A name holds its target (infra/db/holds.ts) while it points at it.
import crypto from 'node:crypto';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { groupCommit, type Outcome } from './batch.js';
import { isDuplicateKey } from './errors.js';
import { heldQueries, type HolderKind } from './holds.js';

export interface IpnsNameRecord {
  /** The name, `k51…` (base36 CIDv1 of the libp2p key). */
  _id: string;
  userId: string;
  keyName: string;
  /** The Ed25519 private key (protobuf, base64) sealed under the master key (infra/secrets.ts). */
  sealedKey: string;
  /** The target of the current record, CIDv1; null until the first publish. */
  cid: string | null;
  multihash: string | null;
  /** The current record's sequence; 0 before the first publish. */
  sequence: number;
  lastPublishedAt: number | null;
  /** The month (UTC, `YYYY-MM`) `publishCount` counts. */
  publishMonth: string | null;
  publishCount: number;
  /** When the current record was last signed and stored again. */
  lastRepublishedAt: number | null;
  /** Set while republishing fails, from the first failure; null when it works. */
  republishFailingSince: number | null;
  lastRepublishError: string | null;
  createdAt: number;
  /** The last STAMPS_KEPT publishes that went together (`advance`), oldest first, each as
   * `<the sequence it took>:<its stamp>`. A publish alone adds none. */
  publishStamps?: string[];
  /** Which process published last (random per process start): see `publishedHere`. */
  publishedBy?: string;
}

const schema = new Schema<IpnsNameRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    keyName: { type: String, required: true },
    sealedKey: { type: String, required: true },
    cid: { type: String, default: null },
    multihash: { type: String, default: null },
    sequence: { type: Number, required: true },
    lastPublishedAt: { type: Number, default: null },
    publishMonth: { type: String, default: null },
    publishCount: { type: Number, required: true },
    lastRepublishedAt: { type: Number, default: null },
    republishFailingSince: { type: Number, default: null },
    lastRepublishError: { type: String, default: null },
    createdAt: { type: Number, required: true },
    publishStamps: { type: [String], default: undefined },
    publishedBy: { type: String },
  },
  { versionKey: false, minimize: false },
);
// Key names are unique per user: a second create with the name fails atomically.
schema.index({ userId: 1, keyName: 1 }, { unique: true });
schema.index({ userId: 1, createdAt: 1 });
schema.index({ multihash: 1 });

/** A publish as `advance` takes it, and what it gives: the new sequence and the record as it was. */
interface Publish {
  ipnsName: string;
  userId: string;
  target: { cid: string; multihash: string };
  at: number;
}
export interface Advanced {
  sequence: number;
  previous: IpnsNameRecord;
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

/** How many of a name's last batched publishes keep their stamp: more than can come between a
 * batch's write and its read of the stamps, which follows at once (each is a conditional update
 * of the name after another). Few and short: FerretDB reads and writes the whole record at every
 * update of the name (32 entries of {sequence, stamp} doubled its CPU per publish). */
export const STAMPS_KEPT = 8;

/**
 * Whether the batched statement with `stamp` took `sequence` of the name, from the record as
 * read after the write: true, false, or undefined when so many batched publishes came since that
 * its entry is gone. Each batched publish keeps its entry, in sequence order; a sequence reached
 * with no entry of its own was taken by a publish alone (or by a process from before stamps),
 * not by this statement. (The last writer's stamp alone, as kept before, was overwritten when
 * another process's batch published the name between the write and the read: the publish was
 * then sent again alone, and the name advanced twice.)
 */
export function tookSequence(
  record: { sequence: number; publishStamps?: string[] } | undefined,
  sequence: number,
  stamp: string,
): boolean | undefined {
  if (!record || record.sequence < sequence) return false;
  const entries = (record.publishStamps ?? []).map((e) => {
    const [q, s] = e.split(':');
    return { q: Number(q), s };
  });
  const entry = entries.find((e) => e.q === sequence);
  if (entry) return entry.s === stamp;
  if (entries.length >= STAMPS_KEPT && entries[0]!.q > sequence) return undefined;
  return false;
}

/** The counter of a user's names (counters.ts), taken by a create and given back by a delete. */
export const ipnsNamesCounter = (userId: string) => `ipns-names:${userId}`;

/** `YYYY-MM` of a time, in UTC: the month publishes count in. */
export const utcMonth = (at: number): string => new Date(at).toISOString().slice(0, 7);

export function createIpnsNameStore(conn: Connection) {
  const Names: Model<IpnsNameRecord> = conn.model<IpnsNameRecord>('IpnsName', schema, 'ipns_names');
  const publisher = crypto.randomBytes(8).toString('hex');

  /** A name holds its current target. */
  const holder: HolderKind = {
    kind: 'ipns',
    async holdersOf(multihash) {
      type Row = Pick<IpnsNameRecord, '_id' | 'userId' | 'cid' | 'createdAt' | 'lastPublishedAt'>;
      const rows = await Names.find({ multihash }, { cid: 1, userId: 1, createdAt: 1, lastPublishedAt: 1 }).lean<Row[]>().exec();
      // It came to hold its target when it was last published.
      return rows.map((r) => ({ id: r._id, userId: r.userId, cid: r.cid!, origins: [], at: r.lastPublishedAt ?? r.createdAt }));
    },
    async holds(key) {
      const row = await Names.findById(key, { cid: 1, userId: 1 }).lean<Pick<IpnsNameRecord, 'cid' | 'userId'>>().exec();
      return row?.cid ? { id: key, userId: row.userId, cid: row.cid, origins: [] } : null;
    },
    ...heldQueries(Names, { multihash: { $ne: null } }),
  };

  /** One publish by itself: one conditional update whose filter decides the month's count. */
  async function advanceAlone({ ipnsName, userId, target, at }: Publish): Promise<Advanced | null> {
    const month = utcMonth(at);
    const set = { cid: target.cid, multihash: target.multihash, lastPublishedAt: at, lastRepublishedAt: at, publishedBy: publisher };
    const update = (filter: object, change: object) =>
      Names.findOneAndUpdate({ _id: ipnsName, userId, ...filter }, change, { returnDocument: 'before' })
        .lean<IpnsNameRecord>()
        .exec();
    // The two filters are complementary: of a name that exists, one matches.
    for (let attempt = 0; attempt < 3; attempt++) {
      const previous =
        (await update({ publishMonth: month }, { $inc: { sequence: 1, publishCount: 1 }, $set: set })) ??
        (await update({ publishMonth: { $ne: month } }, { $inc: { sequence: 1 }, $set: { ...set, publishMonth: month, publishCount: 1 } }));
      // The update was atomic, so the sequence it wrote is the one it read, plus one.
      if (previous) return { sequence: previous.sequence + 1, previous };
      // Neither matched: no such name of the user, or a publish in between began the month.
      if (!(await Names.exists({ _id: ipnsName, userId }))) return null;
    }
    throw new Error(`the publish of ${ipnsName} found its record changing under it three times`);
  }

  /**
   * Publishes that arrive together (batch.ts), each name's first of them: their records read
   * with one query, and each moved on from what was read by one unordered update command whose
   * statements match only a record still at the sequence read (so each is atomic as alone). The
   * command does not say which statements matched: when fewer did than were sent, the stamp each
   * kept with its sequence tells, by one more read (tookSequence). A publish whose record moved
   * meanwhile, and a name's later publishes of the batch, go alone. So 16 clients publishing send
   * about two commands a turn, not one each; a publish alone goes alone.
   */
  const together = groupCommit(async (publishes: Publish[]): Promise<Outcome<Advanced | null>[]> => {
    if (publishes.length === 1) return [await advanceAlone(publishes[0]!).catch(asError)];
    const firsts = new Map<string, number>();
    publishes.forEach((p, i) => firsts.has(p.ipnsName) || firsts.set(p.ipnsName, i));
    const read = await Names.find({ _id: { $in: [...firsts.keys()] } })
      .lean<IpnsNameRecord[]>()
      .exec();
    const records = new Map(read.map((r) => [r._id, r]));
    const results: (Outcome<Advanced | null> | undefined)[] = publishes.map(() => undefined);
    const sent: { index: number; stamp: string; previous: IpnsNameRecord }[] = [];
    for (const [name, index] of firsts) {
      const { userId } = publishes[index]!;
      const previous = records.get(name);
      if (!previous || previous.userId !== userId) {
        results[index] = null; // another user's name is no name of this user's
        continue;
      }
      sent.push({ index, stamp: crypto.randomBytes(6).toString('hex'), previous });
    }
    if (sent.length > 0) {
      const statements = sent.map(({ index, stamp, previous }) => {
        const { target, at } = publishes[index]!;
        const month = utcMonth(at);
        const set = {
          cid: target.cid,
          multihash: target.multihash,
          lastPublishedAt: at,
          lastRepublishedAt: at,
          publishedBy: publisher,
        };
        const counted =
          previous.publishMonth === month ? { publishCount: previous.publishCount + 1 } : { publishMonth: month, publishCount: 1 };
        return {
          updateOne: {
            filter: { _id: previous._id, sequence: previous.sequence },
            // The stamps as read, and this one: the statement matches only the record as read.
            update: {
              $set: {
                ...set,
                ...counted,
                sequence: previous.sequence + 1,
                publishStamps: [...(previous.publishStamps ?? []), `${previous.sequence + 1}:${stamp}`].slice(-STAMPS_KEPT),
              },
            },
          },
        };
      });
      const written = await Names.bulkWrite(statements, { ordered: false });
      let matched = new Set(sent.map((s) => s.index));
      if (written.matchedCount < sent.length) {
        const now = await Names.find({ _id: { $in: sent.map((s) => s.previous._id) } }, { sequence: 1, publishStamps: 1 })
          .lean<Pick<IpnsNameRecord, '_id' | 'sequence' | 'publishStamps'>[]>()
          .exec();
        const records = new Map(now.map((r) => [r._id, r]));
        matched = new Set();
        for (const { index, stamp, previous } of sent) {
          const took = tookSequence(records.get(previous._id), previous.sequence + 1, stamp);
          if (took) matched.add(index);
          // Unknowable (STAMPS_KEPT batched publishes of the name since): failed rather than sent again,
          // which could advance the name twice.
          else if (took === undefined) results[index] = new Error(`the publish of ${previous._id} could not tell whether it was written`);
        }
      }
      for (const { index, previous } of sent) {
        if (matched.has(index)) results[index] = { sequence: previous.sequence + 1, previous };
      }
    }
    // The rest go alone, together: each update is atomic, so their order among themselves is any.
    return Promise.all(publishes.map((p, i) => (results[i] !== undefined ? results[i]! : advanceAlone(p).catch(asError))));
  });

  return {
    model: Names,
    holder,

    /** Inserts the name; false when the user has a name with this key name. */
    async insert(name: IpnsNameRecord): Promise<boolean> {
      try {
        await Names.create(name);
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    get: (ipnsName: string) => Names.findById(ipnsName).lean<IpnsNameRecord>().exec(),

    /** The user's names, oldest first (the contract's list is an array; a plan allows few). */
    listForUser: (userId: string) => Names.find({ userId }).sort({ createdAt: 1 }).lean<IpnsNameRecord[]>().exec(),

    /**
     * Points the user's name at `target`, raising its sequence and counting the publish in its
     * month, atomically: the record as it was, or null when the user has no such name.
     * Publishes that arrive together share their commands (`together`); one alone is one
     * update (two at a month's first publish).
     */
    advance: (ipnsName: string, userId: string, target: { cid: string; multihash: string }, at: number): Promise<Advanced | null> =>
      together({ ipnsName, userId, target, at }),

    /** Whether this process made the record's last publish (so stored its record in order with
     * its own later ones, infra/ipfs/ipns.ts). */
    publishedHere: (record: IpnsNameRecord): boolean => record.publishedBy === publisher,

    /** Notes how the last republish went. */
    async republished(ipnsName: string, outcome: { at: number } | { error: string; at: number }): Promise<void> {
      if ('error' in outcome) {
        await Names.updateOne({ _id: ipnsName, republishFailingSince: null }, { $set: { republishFailingSince: outcome.at } }).exec();
        await Names.updateOne({ _id: ipnsName }, { $set: { lastRepublishError: outcome.error.slice(0, 500) } }).exec();
      } else {
        await Names.updateOne(
          { _id: ipnsName },
          { $set: { lastRepublishedAt: outcome.at, republishFailingSince: null, lastRepublishError: null } },
        ).exec();
      }
    },

    /** Deletes the name (and its key); the record as it was, or null when already gone. */
    remove: (ipnsName: string) => Names.findOneAndDelete({ _id: ipnsName }).lean<IpnsNameRecord>().exec(),
  };
}
