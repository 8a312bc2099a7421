// MongoDB through mongoose: one connection per process and a small store per collection.
// Every state change is a single-document atomic operation (no transactions: FerretDB 1.24
// has none, and these are also what scales on a real MongoDB).
import mongoose, { type Model } from 'mongoose';
import { count } from './count.js';
import { createAnalyticsStore } from './analytics.js';
import { createApiKeyStore } from './api-keys.js';
import { createBucketStore } from './buckets.js';
import { createCorsStore } from './cors.js';
import { createFileStore } from './files.js';
import { createFolderStore } from './folders.js';
import { createGatewayTokenStore } from './gateway-tokens.js';
import { createHoldChangeStore } from './hold-changes.js';
import { createHolds } from './holds.js';
import { createCounterStore } from './counters.js';
import { createIpnsNameStore } from './ipns-names.js';
import { createLockStore } from './locks.js';
import { fileIdsGate } from './migrations/0001-file-ids.js';
import { createMigrationStore } from './migrations/store.js';
import { createMultipartStore } from './multipart.js';
import { createObjectStore } from './objects.js';
import { createPinStore } from './pins.js';
import { createProcessStore } from './processes.js';
import { createRateLimitStore } from './rate-limits.js';
import { createRestoreStore } from './restores.js';
import { createAuditStore } from './audits.js';
import { createSnapshotListingStore } from './snapshot-listings.js';
import { createSignedTokenStore } from './signed-tokens.js';
import { createSnapshotStore } from './snapshots.js';
import { createUsageStore, type HoldKind, type HoldsFromRecords } from './usage.js';
import type { UserRecords } from './usage-tally.js';
import { createUserStore } from './users.js';
import { createWebhookStore } from './webhooks.js';

export async function openDatabase(uri: string) {
  const connection = mongoose.createConnection(uri, {
    serverSelectionTimeoutMS: 5_000,
    // Mongoose would otherwise queue operations while the server is away; fail fast instead
    // so /readyz and the error handler can answer 503.
    bufferCommands: false,
  });
  // Operations counted by collection and method (`operations()`, on /metrics): the round trips an
  // operation costs are the service's main cost on small writes (npm run bench prints them).
  // Mongoose's per-operation hook rather than the driver's command monitoring, which decodes
  // every reply a second time for its events.
  const operations = new Map<string, number>();
  connection.set('debug', (collection: string, method: string) => {
    const key = `${method} ${collection}`;
    operations.set(key, (operations.get(key) ?? 0) + 1);
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
  const signedTokens = createSignedTokenStore(connection);
  const gatewayTokens = createGatewayTokenStore(connection);
  const buckets = createBucketStore(connection);
  const objects = createObjectStore(connection);
  const multipart = createMultipartStore(connection);
  const webhooks = createWebhookStore(connection);
  // Every kind of record that holds content; a new kind is its store plus one entry here.
  const holds = createHolds([pins.holder, files.holder, snapshots.holder, ipnsNames.holder, objects.holder]);
  const processes = createProcessStore(connection);
  const holdChanges = createHoldChangeStore(connection, processes.self);
  const locks = createLockStore(connection);
  // Storage use is counted over distinct content (usage.ts); the records are read to rebuild
  // a user (counted before, once, or by a recount), and of one content to check a change.
  const holdsFromRecords: HoldsFromRecords = async (userIds, multihashes) => {
    type Held = { userId: string; multihash: string; size: number | null };
    const one = (values: string[]) => (values.length === 1 ? values[0] : { $in: values });
    const of = { userId: one(userIds), ...(multihashes ? { multihash: one(multihashes) } : {}) };
    const fields = { userId: 1, multihash: 1, size: 1 };
    const [f, p, o] = await Promise.all([
      files.model.find(of, fields).lean<Held[]>().exec(),
      pins.model
        .find({ ...of, status: 'pinned' }, fields)
        .lean<Held[]>()
        .exec(),
      objects.model.find(of, fields).lean<Held[]>().exec(),
    ]);
    const row = (kind: HoldKind) => (r: Held) => ({ kind, userId: r.userId, multihash: r.multihash, size: r.size ?? 0 });
    return [...f.map(row('file')), ...p.map(row('pin')), ...o.map(row('object'))];
  };
  // A user's records of each kind in multihash order, by their {userId, multihash} indexes.
  const kinds = { file: byContent(files.model), pin: byContent(pins.model, { status: 'pinned' }), object: byContent(objects.model) };
  const userRecords: UserRecords = {
    after: (kind, userId, after, limit) => kinds[kind].after(userId, after, limit),
    count: (kind, userId, multihash) => kinds[kind].count(userId, multihash),
  };
  const usage = createUsageStore(connection, locks, holdsFromRecords, userRecords);
  const analytics = createAnalyticsStore(connection);
  const audits = createAuditStore(connection);
  const restores = createRestoreStore(connection);
  const migrations = createMigrationStore(connection);
  // While migration 1 runs, a user's files are read once that user's have moved.
  files.useGate(fileIdsGate({ files, connection, migrations }));
  await Promise.all(Object.values(connection.models).map((m) => m.init()));
  return {
    connection,
    audits,
    /** Restores from backups: the audit's windows (infra/db/restores.ts). */
    restores,
    users,
    apiKeys,
    rateLimits,
    holds,
    holdChanges,
    processes,
    pins,
    files,
    folders,
    cors,
    snapshots,
    snapshotListings,
    ipnsNames,
    counters,
    signedTokens,
    gatewayTokens,
    buckets,
    objects,
    multipart,
    webhooks,
    usage,
    /** One user's records by content (infra/db/usage-tally.ts). */
    userRecords,
    analytics,
    locks,
    /** Which data migrations have run (migrations/). */
    migrations,
    /** MongoDB operations sent since the process started, by `<method> <collection>`. */
    operations: (): ReadonlyMap<string, number> => operations,
    async ping(): Promise<void> {
      await connection.db!.admin().ping();
    },
    async close(): Promise<void> {
      await Promise.all([apiKeys.flush(), gatewayTokens.flush(), rateLimits.flush()]).catch(() => undefined);
      await connection.close();
    },
  };
}

export type Database = Awaited<ReturnType<typeof openDatabase>>;

/** One kind of record's reads for usage-tally.ts; `holding`: what else makes a record hold. */
function byContent<T>(model: Model<T>, holding: Record<string, unknown> = {}) {
  type Row = { multihash: string; size: number | null };
  return {
    async after(userId: string, after: string, limit: number) {
      const rows = await model
        .find({ userId, multihash: { $gt: after }, ...holding }, { _id: 0, multihash: 1, size: 1 })
        .sort({ multihash: 1 })
        .limit(limit)
        .lean<Row[]>()
        .exec();
      return rows.map((r) => ({ multihash: r.multihash, size: r.size ?? 0 }));
    },
    count: (userId: string, multihash: string) => count(model, { userId, multihash, ...holding }),
  };
}
