import crypto from 'node:crypto';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

interface Lock {
  _id: string;
  token: string;
  expiresAt: number;
}

const schema = new Schema<Lock>(
  { _id: { type: String, required: true }, token: { type: String, required: true }, expiresAt: { type: Number, required: true } },
  { versionKey: false },
);

export class LockTimeout extends Error {
  override name = 'LockTimeout';
}

/**
 * Short mutual exclusion across processes, for the few decisions that read several documents
 * and then write (the last-API-key rule, a plan's key limit, cycle-free folder moves). Built on an
 * insert into a unique _id, the one write FerretDB 1.24 makes atomic under concurrency. A lock
 * whose holder died is taken over once it expires (a stored time, not a TTL index).
 */
export function createLockStore(conn: Connection) {
  const Locks: Model<Lock> = conn.model<Lock>('Lock', schema, 'locks');
  return {
    /** Runs `fn` holding the lock; a long `fn` calls `renew` now and then to keep it another ttl. */
    async withLock<T>(
      name: string,
      fn: (renew: () => Promise<void>) => Promise<T>,
      options: { ttlMs?: number; waitMs?: number } = {},
    ): Promise<T> {
      const ttlMs = options.ttlMs ?? 30_000;
      const deadline = Date.now() + (options.waitMs ?? 10_000);
      const token = crypto.randomUUID();
      for (let attempt = 0; ; attempt++) {
        try {
          await Locks.create({ _id: name, token, expiresAt: Date.now() + ttlMs });
          break;
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
        // An expired lock is taken over at once, even by a caller that does not wait.
        const expired = await Locks.deleteOne({ _id: name, expiresAt: { $lt: Date.now() } }).exec();
        if (expired.deletedCount > 0) continue;
        if (Date.now() > deadline) throw new LockTimeout(`lock ${name} is busy`);
        await new Promise((r) => setTimeout(r, Math.min(5 * 2 ** Math.min(attempt, 4), 80) * (0.5 + Math.random())));
      }
      const renew = async () => {
        await Locks.updateOne({ _id: name, token }, { $set: { expiresAt: Date.now() + ttlMs } }).exec();
      };
      try {
        return await fn(renew);
      } finally {
        await Locks.deleteOne({ _id: name, token }).exec();
      }
    },
  };
}

export type LockStore = ReturnType<typeof createLockStore>;
