import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { AUTH_MEMORY_MS } from '../constants.js';
import { batchedById } from './batch.js';
import { rememberReads } from './by-id.js';
import { count } from './count.js';
import { createUseRecorder } from './last-used.js';

export interface ApiKey {
  /** The key prefix (first 12 characters): public, unique, the S3 access key id later. */
  _id: string;
  userId: string;
  /** SHA-256 of the full key, hex: how a request's key is found. */
  digest: string;
  /** The full key sealed with the master key (infra/secrets.ts), for SigV4. */
  sealedSecret: string;
  keyName: string;
  createdAt: number;
  expiresAt?: number;
  lastUsedAt?: number;
}

const schema = new Schema<ApiKey>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true, index: true },
    digest: { type: String, required: true, unique: true },
    sealedSecret: { type: String, required: true },
    keyName: { type: String, required: true },
    createdAt: { type: Number, required: true },
    expiresAt: { type: Number },
    lastUsedAt: { type: Number },
  },
  { versionKey: false },
);

export function createApiKeyStore(conn: Connection) {
  const Keys: Model<ApiKey> = conn.model<ApiKey>('ApiKey', schema, 'apikeys');
  // Every request needs its key: a key found is remembered for AUTH_MEMORY_MS (by-id.ts), and
  // the reads of the keys not remembered share one query (batch.ts). A key deleted through any
  // process is let go of by all of them within that time, which its deletion waits out before
  // it answers (core/apikeys.ts).
  const remembered = rememberReads(batchedById(Keys), AUTH_MEMORY_MS);
  const get = remembered.get;
  const uses = createUseRecorder(Keys);

  return {
    model: Keys,

    insert: (key: ApiKey) => Keys.create(key),

    /** The key with this prefix (its `_id`): how a request's key is found, by `_id` alone
     * (by-id.ts); the caller compares the digest. Remembered briefly (see above). */
    get,

    countForUser: (userId: string) => count(Keys, { userId }),

    async findByPrefix(userId: string, prefix: string): Promise<ApiKey | null> {
      const key = await get(prefix);
      return key?.userId === userId ? key : null;
    },

    async listForUser(userId: string): Promise<ApiKey[]> {
      const keys = await Keys.find({ userId }).sort({ createdAt: 1, _id: 1 }).lean<ApiKey[]>().exec();
      return keys.map(uses.withPending);
    },

    /** Keys of the user other than `exceptId` that can still authenticate at `now`. */
    countUsableOthers: (userId: string, exceptId: string, now: number) =>
      count(Keys, {
        userId,
        _id: { $ne: exceptId },
        $or: [{ expiresAt: { $exists: false } }, { expiresAt: null }, { expiresAt: { $gt: now } }],
      }),

    async delete(userId: string, id: string): Promise<boolean> {
      const key = await Keys.findById(id).lean<ApiKey>().exec();
      if (key?.userId !== userId) return false;
      const res = await Keys.deleteOne({ _id: id }).exec();
      uses.forget(id);
      remembered.forget(id);
      return res.deletedCount === 1;
    },

    /** lastUsedAt, written in batches (last-used.ts). */
    recordUse: uses.record,
    flush: uses.flush,
  };
}

export type ApiKeyStore = ReturnType<typeof createApiKeyStore>;
