import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { randomBase62 } from '../secrets.js';
import { AUTH_MEMORY_MS } from '../constants.js';
import { rememberReads } from './by-id.js';
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
  const byId = rememberReads((userId: string) => Users.findById(userId).lean<User>().exec(), AUTH_MEMORY_MS);
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

    /** Read at most once per AUTH_MEMORY_MS (by-id.ts): every request reads its user. */
    get: byId.get,

    list: () => Users.find().sort({ createdAt: 1 }).lean<User[]>().exec(),

    async setPlan(userId: string, plan: string): Promise<User | null> {
      const user = await Users.findByIdAndUpdate(userId, { $set: { plan, updatedAt: Date.now() } }, { returnDocument: 'after' })
        .lean<User>()
        .exec();
      byId.forget(userId);
      return user;
    },
  };
}

export type UserStore = ReturnType<typeof createUserStore>;
