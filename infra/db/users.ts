import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { randomBase62 } from '../secrets.js';
import { isDuplicateKey } from './errors.js';

export interface User {
  _id: string;
  email: string;
  name: string;
  plan: string;
  /** Number of API keys the user has: guards the plan's key limit and the last-key rule with
   * single-document atomic updates (FerretDB has no transactions). */
  keyCount: number;
  createdAt: number;
  updatedAt: number;
}

const schema = new Schema<User>(
  {
    _id: { type: String, required: true },
    email: { type: String, required: true, unique: true },
    name: { type: String, required: true },
    plan: { type: String, required: true },
    keyCount: { type: Number, required: true, default: 0 },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false },
);

export function createUserStore(conn: Connection) {
  const Users: Model<User> = conn.model<User>('User', schema, 'users');
  return {
    model: Users,

    /** The new user, or null when the email is taken. */
    async create(input: { email: string; name: string; plan: string }): Promise<User | null> {
      const now = Date.now();
      const doc = {
        _id: `usr_${randomBase62(16)}`,
        ...input,
        email: input.email.toLowerCase(),
        keyCount: 0,
        createdAt: now,
        updatedAt: now,
      };
      try {
        await Users.create(doc);
      } catch (err) {
        if (isDuplicateKey(err)) return null;
        throw err;
      }
      return doc;
    },

    get: (userId: string) => Users.findById(userId).lean<User>().exec(),

    list: () => Users.find().sort({ createdAt: 1 }).lean<User[]>().exec(),

    setPlan: (userId: string, plan: string) =>
      Users.findByIdAndUpdate(userId, { $set: { plan, updatedAt: Date.now() } }, { returnDocument: 'after' })
        .lean<User>()
        .exec(),

    /** Takes one key slot if the user has fewer than `max` keys; false when the plan is full. */
    async reserveKeySlot(userId: string, max: number): Promise<boolean> {
      const res = await Users.updateOne({ _id: userId, keyCount: { $lt: max } }, { $inc: { keyCount: 1 } }).exec();
      return res.modifiedCount === 1;
    },

    /** Gives a key slot back, but never the last one: false when only one key is left. */
    async releaseKeySlot(userId: string): Promise<boolean> {
      const res = await Users.updateOne({ _id: userId, keyCount: { $gt: 1 } }, { $inc: { keyCount: -1 } }).exec();
      return res.modifiedCount === 1;
    },

    /** Undoes a reserve or release whose key write did not happen. */
    async adjustKeyCount(userId: string, by: number): Promise<void> {
      await Users.updateOne({ _id: userId }, { $inc: { keyCount: by } }).exec();
    },
  };
}

export type UserStore = ReturnType<typeof createUserStore>;
