// MongoDB through mongoose: one connection per process and a small store per collection.
// Every state change is a single-document atomic operation (no transactions: FerretDB 1.24
// has none, and these are also what scales on a real MongoDB).
import mongoose from 'mongoose';
import { createApiKeyStore } from './api-keys.js';
import { createCorsStore } from './cors.js';
import { createFileStore } from './files.js';
import { createFolderStore } from './folders.js';
import { createHoldChangeStore } from './hold-changes.js';
import { createHolds } from './holds.js';
import { createCounterStore } from './counters.js';
import { createIpnsNameStore } from './ipns-names.js';
import { createLockStore } from './locks.js';
import { createPinStore } from './pins.js';
import { createRateLimitStore } from './rate-limits.js';
import { createSnapshotListingStore } from './snapshot-listings.js';
import { createSnapshotStore } from './snapshots.js';
import { createUsageStore } from './usage.js';
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
  const snapshotListings = createSnapshotListingStore(connection);
  const ipnsNames = createIpnsNameStore(connection);
  const counters = createCounterStore(connection);
  // Every kind of record that holds content; a new kind is its store plus one entry here.
  const holds = createHolds([pins.holder, files.holder, snapshots.holder, ipnsNames.holder]);
  // Storage use is counted (usage.ts); the records are summed only once per user from before
  // counters existed.
  const usage = createUsageStore(connection, async (userId) => {
    const [f, p] = await Promise.all([files.totalSize(userId), pins.totalPinnedSize(userId)]);
    return { files: f, pinned: p };
  });
  const holdChanges = createHoldChangeStore(connection);
  const locks = createLockStore(connection);
  await Promise.all(Object.values(connection.models).map((m) => m.init()));
  return {
    connection,
    users,
    apiKeys,
    rateLimits,
    holds,
    holdChanges,
    pins,
    files,
    folders,
    cors,
    snapshots,
    snapshotListings,
    ipnsNames,
    counters,
    usage,
    locks,
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
