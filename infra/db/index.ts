// MongoDB through mongoose: one connection per process and a small store per collection.
// Every state change is a single-document atomic operation (no transactions: FerretDB 1.24
// has none, and these are also what scales on a real MongoDB).
import mongoose from 'mongoose';
import { createApiKeyStore } from './api-keys.js';
import { createCorsStore } from './cors.js';
import { createFileStore } from './files.js';
import { createFolderStore } from './folders.js';
import { createHolds } from './holds.js';
import { createLockStore } from './locks.js';
import { createPinStore } from './pins.js';
import { createRateLimitStore } from './rate-limits.js';
import { createSnapshotStore } from './snapshots.js';
import { createUserStore } from './users.js';

export async function openDatabase(uri: string) {
  const connection = mongoose.createConnection(uri, {
    serverSelectionTimeoutMS: 5_000,
    // Mongoose would otherwise queue operations while the server is away; fail fast instead
    // so /readyz and the error handler can answer 503.
    bufferCommands: false,
  });
  await connection.asPromise();
  const users = createUserStore(connection);
  const apiKeys = createApiKeyStore(connection);
  const rateLimits = createRateLimitStore(connection);
  const pins = createPinStore(connection);
  const files = createFileStore(connection);
  const folders = createFolderStore(connection);
  const cors = createCorsStore(connection);
  const snapshots = createSnapshotStore(connection);
  // Every kind of record that holds content; a new kind is its store plus one entry here.
  const holds = createHolds([pins.holder, files.holder, snapshots.holder]);
  const usageCache = new Map<string, { bytes: number; at: number }>();
  const locks = createLockStore(connection);
  await Promise.all(Object.values(connection.models).map((m) => m.init()));
  return {
    connection,
    users,
    apiKeys,
    rateLimits,
    holds,
    pins,
    files,
    folders,
    cors,
    snapshots,
    locks,
    /**
     * Bytes the user stores: files plus pinned content, derived rather than counted. Quick
     * checks may accept a value up to `maxAgeMs` old; the quota decision of an upload reads
     * it fresh under the user's lock.
     */
    async usage(userId: string, options: { maxAgeMs?: number } = {}): Promise<number> {
      const cached = usageCache.get(userId);
      if (cached && options.maxAgeMs && Date.now() - cached.at <= options.maxAgeMs) return cached.bytes;
      const [f, p] = await Promise.all([files.totalSize(userId), pins.totalPinnedSize(userId)]);
      if (usageCache.size > 10_000) usageCache.clear();
      usageCache.set(userId, { bytes: f + p, at: Date.now() });
      return f + p;
    },
    async ping(): Promise<void> {
      await connection.db!.admin().ping();
    },
    async close(): Promise<void> {
      await Promise.all([apiKeys.flush(), rateLimits.flush()]).catch(() => undefined);
      await connection.close();
    },
  };
}

export type Database = Awaited<ReturnType<typeof openDatabase>>;
