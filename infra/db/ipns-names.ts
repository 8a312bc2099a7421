// IPNS names: the key (sealed), the target and the sequence of the current record, and how
// republishing goes. A name holds its target (infra/db/holds.ts) while it points at it.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
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
  },
  { versionKey: false, minimize: false },
);
// Key names are unique per user: a second create with the name fails atomically.
schema.index({ userId: 1, keyName: 1 }, { unique: true });
schema.index({ userId: 1, createdAt: 1 });
schema.index({ multihash: 1 });

/** The counter of a user's names (counters.ts), taken by a create and given back by a delete. */
export const ipnsNamesCounter = (userId: string) => `ipns-names:${userId}`;

/** `YYYY-MM` of a time, in UTC: the month publishes count in. */
export const utcMonth = (at: number): string => new Date(at).toISOString().slice(0, 7);

export function createIpnsNameStore(conn: Connection) {
  const Names: Model<IpnsNameRecord> = conn.model<IpnsNameRecord>('IpnsName', schema, 'ipns_names');

  /** A name holds its current target. */
  const holder: HolderKind = {
    kind: 'ipns',
    async holdersOf(multihash) {
      const rows = await Names.find({ multihash }, { cid: 1, userId: 1 }).lean<Pick<IpnsNameRecord, '_id' | 'userId' | 'cid'>[]>().exec();
      return rows.map((r) => ({ id: r._id, userId: r.userId, cid: r.cid!, origins: [] }));
    },
    async holds(key) {
      const row = await Names.findById(key, { cid: 1 }).lean<Pick<IpnsNameRecord, 'cid'>>().exec();
      return row?.cid ? { cid: row.cid, origins: [] } : null;
    },
    ...heldQueries(Names, { multihash: { $ne: null } }),
  };

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
     * month, in one atomic update (two at a month's first publish): the record as it was, or
     * null when the user has no such name.
     */
    async advance(
      ipnsName: string,
      userId: string,
      target: { cid: string; multihash: string },
      at: number,
    ): Promise<{ sequence: number; previous: IpnsNameRecord } | null> {
      const month = utcMonth(at);
      const set = { cid: target.cid, multihash: target.multihash, lastPublishedAt: at, lastRepublishedAt: at };
      const update = (filter: object, change: object) =>
        Names.findOneAndUpdate({ _id: ipnsName, userId, ...filter }, change, { returnDocument: 'before' })
          .lean<IpnsNameRecord>()
          .exec();
      // The two filters are complementary: of a name that exists, one matches.
      for (let attempt = 0; attempt < 3; attempt++) {
        const previous =
          (await update({ publishMonth: month }, { $inc: { sequence: 1, publishCount: 1 }, $set: set })) ??
          (await update(
            { publishMonth: { $ne: month } },
            { $inc: { sequence: 1 }, $set: { ...set, publishMonth: month, publishCount: 1 } },
          ));
        // The update was atomic, so the sequence it wrote is the one it read, plus one.
        if (previous) return { sequence: previous.sequence + 1, previous };
        // Neither matched: no such name of the user, or a publish in between began the month.
        if (!(await Names.exists({ _id: ipnsName, userId }))) return null;
      }
      throw new Error(`the publish of ${ipnsName} found its record changing under it three times`);
    },

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
