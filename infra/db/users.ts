import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { randomBase62 } from '../secrets.js';
import { coalesceReads } from './by-id.js';
import { isDuplicateKey } from './errors.js';

export interface User {
  _id: string;
  email: string;
  name: string;
  plan: string;
  createdAt: number;
  updatedAt: number;
}

const schema = new Schema<User>(
  {
    _id: { type: String, required: true },
    email: { type: String, required: true, unique: true },
    name: { type: String, required: true },
    plan: { type: String, required: true },
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

    /** Concurrent lookups of one user share reads (by-id.ts). */
    get: coalesceReads((userId: string) => Users.findById(userId).lean<User>().exec()),

    list: () => Users.find().sort({ createdAt: 1 }).lean<User[]>().exec(),

    setPlan: (userId: string, plan: string) =>
      Users.findByIdAndUpdate(userId, { $set: { plan, updatedAt: Date.now() } }, { returnDocument: 'after' })
        .lean<User>()
        .exec(),
  };
}

export type UserStore = ReturnType<typeof createUserStore>;
