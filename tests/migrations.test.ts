// Data migrations (infra/db/migrations/): numbered, recorded in `migrations`, run in the
// background while the API serves, one process at a time, and resumed after a kill from what
// the data says. Migration 1 (files from before file ids) at tens of thousands of records.
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { create as digestOf } from 'multiformats/hashes/digest';
import type { ApiServer } from '../api/server.js';
import { userContentKey } from '../infra/db/by-id.js';
import { TWIN_INDEX, TWIN_INDEX_NAME, type FileRecord } from '../infra/db/files.js';
import { openDatabase, type Database } from '../infra/db/index.js';
import { LockTimeout } from '../infra/db/locks.js';
import { migratedFileId } from '../infra/db/migrations/0001-file-ids.js';
import { expandMigrations, migrationStatus, runMigrations } from '../infra/db/migrations/runner.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { createLogger } from '../infra/logger.js';
import { call, createUser, databaseUri, startTestApi } from './support/stack.js';
import { eventually } from './support/worker.js';

const logger = createLogger('silent');
const exec = promisify(execFile);

/** The operator's CLI on a database of its own. */
async function admin(uri: string, ...args: string[]): Promise<{ code: number; out: any }> {
  try {
    const { stdout } = await exec('npx', ['tsx', 'api/cli/admin.ts', ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, MONGODB_URI: uri, MASTER_KEY: '00'.repeat(32) },
    });
    return { code: 0, out: args.includes('--json') ? JSON.parse(stdout) : stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: args.includes('--json') && e.stdout ? JSON.parse(e.stdout) : e.stdout };
  }
}
const FILE_IDS = '0001-file-ids';

/** A file record as the release before file ids wrote it: keyed by user and content. */
function legacy(userId: string, i: number, now: number): FileRecord {
  const digest = crypto.createHash('sha256').update(`${userId} ${i} ${now}`).digest();
  const cid = parseCid(CID.create(1, raw.code, digestOf(0x12, digest)).toString());
  return {
    _id: userContentKey(userId, cid.multihash),
    userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: `file-${i % 50}.txt`,
    description: i % 2 ? 'described' : null,
    size: 10 + i,
    dagSize: null,
    mimeType: 'text/plain',
    folderId: i % 5 === 0 ? null : `fld_legacy${i % 4}`,
    metadata: { n: String(i) },
    createdAt: now + i,
    updatedAt: now + i,
  };
}

async function seed(db: Database, users: string[], perUser: number): Promise<FileRecord[]> {
  const now = Date.now();
  const all = users.flatMap((u) => Array.from({ length: perUser }, (_, i) => legacy(u, i, now)));
  for (let i = 0; i < all.length; i += 2000) await db.files.model.collection.insertMany(all.slice(i, i + 2000) as never[]);
  return all;
}

/** Every record moved once, with its fields, nothing half-done left, the twins index there. */
async function expectMoved(db: Database, before: FileRecord[]): Promise<void> {
  const after = await db.files.model.find({}).lean<FileRecord[]>().exec();
  expect(after).toHaveLength(before.length);
  const byId = new Map(after.map((f) => [f._id, f]));
  const wrong = before.filter(
    (old) => JSON.stringify(byId.get(migratedFileId(old._id))) !== JSON.stringify({ ...old, _id: migratedFileId(old._id) }),
  );
  expect(wrong.map((w) => w._id)).toEqual([]);
  expect(await db.connection.collection('filemigrations').countDocuments({})).toBe(0);
  const indexes = await db.files.model.collection.indexes();
  expect(indexes.find((i) => i.name === TWIN_INDEX_NAME)).toMatchObject({ unique: true });
}

test('an API serves while migration 1 runs in the background: a user it meets moves first; every record moves; it is recorded done', async () => {
  const uri = databaseUri('stupa_migrations');
  // An API of this release on an empty database: its migrations have nothing to do.
  let api: ApiServer = await startTestApi({ MONGODB_URI: uri });
  const db = await openDatabase(uri);
  await eventually(
    () => migrationStatus(db),
    (s) => s.every((m) => m.state === 'done'),
    30_000,
    'migrations of an empty database',
  );
  const users = await Promise.all(Array.from({ length: 30 }, () => createUser(api)));
  await api.close();
  // The database as the release before left it: 30,000 records, and migration 1 not run.
  const before = await seed(
    db,
    users.map((u) => u.userId),
    1000,
  );
  await db.migrations.model.deleteMany({}).exec();

  api = await startTestApi({ MONGODB_URI: uri });
  try {
    const met = users[17]!;
    const state = (await api.deps.db.migrations.get(FILE_IDS))?.state;
    const list = await call(api, 'GET', '/upload/list?limit=50', { key: met.apiKey });
    // The request was served while the migration ran, not after it.
    expect(state).not.toBe('done');
    expect(list.status).toBe(200);
    const theirs = before.filter((f) => f.userId === met.userId).sort((a, b) => b.createdAt - a.createdAt);
    expect(list.body.items.map((f: { id: string }) => f.id)).toEqual(theirs.slice(0, 50).map((f) => migratedFileId(f._id)));
    // Their records moved before the answer, all of them.
    expect(await db.files.model.countDocuments({ userId: met.userId, _id: { $not: /^fil_/ } }).exec()).toBe(0);
    const one = theirs[123]!;
    const read = await call(api, 'GET', `/files/${migratedFileId(one._id)}`, { key: met.apiKey });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: migratedFileId(one._id), name: one.name, size: one.size, folderId: one.folderId });
    // Another user's file is as missing as ever.
    expect((await call(api, 'GET', `/files/${migratedFileId(one._id)}`, { key: users[3]!.apiKey })).status).toBe(404);

    const record = await eventually(
      () => db.migrations.get(FILE_IDS),
      (r) => r?.state === 'done',
      120_000,
      'migration 1 done',
    );
    await expectMoved(db, before);
    // The background run counted what it moved; the two users met moved in their requests.
    expect(record!.changed).toBeGreaterThanOrEqual(before.length - 2000);
    expect(record!.changed).toBeLessThanOrEqual(before.length);
    expect(record).toMatchObject({ error: null, by: expect.stringMatching(/^api@/) });
    // The twin rule holds for moved records: the same content, name and folder is that file.
    const twin = await db.files.insert({ ...one, _id: 'fil_0000000000000000', description: 'again' });
    expect(twin).toMatchObject({ created: false, file: { _id: migratedFileId(one._id), description: 'again' } });
  } finally {
    await api.close();
    await db.connection.dropDatabase().catch(() => undefined);
    await db.close();
  }
}, 240_000);

test('a process killed mid-migration leaves it running; the next run, once the lease expires, finishes it and each record moved once', async () => {
  const uri = databaseUri('stupa_migrations_kill');
  const db = await openDatabase(uri);
  try {
    await expandMigrations(db);
    const users = Array.from({ length: 12 }, (_, i) => `usr_killed${String(i).padStart(12, '0')}`);
    const before = await seed(db, users, 1000);
    // What a kill between the writes of a page leaves (0001-file-ids.ts): a copy in its
    // placeholder folder with its original gone, one with its original still there, and an
    // entry whose copy was never written.
    const files = db.files.model.collection;
    const log = db.connection.collection('filemigrations');
    const [a, b, c] = [before[5]!, before[1006]!, before[2007]!];
    for (const old of [a, b])
      await files.insertOne({ ...old, _id: migratedFileId(old._id), folderId: `\0${old._id}\0${old.folderId ?? ''}` } as never);
    await files.deleteOne({ _id: a._id as never });
    for (const old of [a, b, c]) await log.insertOne({ _id: migratedFileId(old._id), oldKey: old._id } as never);

    const child = spawn(process.execPath, ['--import', 'tsx', 'tests/support/migrate-child.ts', uri], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await eventually(
      () => db.migrations.get(FILE_IDS),
      (r) => (r?.changed ?? 0) >= 3000,
      60_000,
      'the child moving 3,000 records',
    );
    child.kill('SIGKILL');
    await exited;
    const killed = await db.migrations.get(FILE_IDS);
    expect(killed).toMatchObject({ state: 'running', by: expect.stringMatching(/^test-child@/) });
    expect(killed!.changed).toBeLessThan(before.length);

    // The operator's view, and a run asked for while the lease is held.
    const status = await admin(uri, 'migrations', '--json');
    expect(status.out).toMatchObject([
      { key: FILE_IDS, state: 'running', changed: killed!.changed },
      { key: '0002-webhook-event-index', state: 'pending' },
    ]);
    const refused = await admin(uri, 'migrations', 'run', '--json');
    expect(refused).toMatchObject({ code: 1, out: { error: { reason: 'MIGRATIONS_RUNNING' } } });
    // Its lease has not expired: another run is refused, then takes over once it has.
    await expect(runMigrations(db, { logger, by: 'test' })).rejects.toBeInstanceOf(LockTimeout);
    await db.connection.collection('locks').updateOne({ _id: 'migrations' as never }, { $set: { expiresAt: 0 } });
    const runs = await runMigrations(db, { logger, by: 'test' });
    expect(runs.map((r) => [r.key, r.done])).toEqual([
      [FILE_IDS, true],
      ['0002-webhook-event-index', true],
    ]);
    await expectMoved(db, before);
    expect(await db.migrations.get(FILE_IDS)).toMatchObject({ state: 'done', by: 'test', error: null });
    // Done is done: the next run has nothing to do.
    expect(await runMigrations(db, { logger, by: 'test' })).toEqual([]);
    expect((await migrationStatus(db)).map((m) => m.state)).toEqual(['done', 'done']);
    expect((await admin(uri, 'migrations')).out).toMatch(/^0001-file-ids +done +[\d,]+ records changed, started .*, done /m);
    // Counted across both runs. Counted by neither: a page the killed run moved without recording
    // it (1,000 at most), and the two settled from the log (`a` and `b`).
    const { changed } = (await db.migrations.get(FILE_IDS))!;
    expect(changed).toBeGreaterThanOrEqual(before.length - 1000 - 2);
    expect(changed).toBeLessThanOrEqual(before.length);
  } finally {
    await db.connection.dropDatabase().catch(() => undefined);
    await db.close();
  }
}, 240_000);

test("a database the migration's first form left half-done (a copy beside its original, no twins index): expand finishes it before serving", async () => {
  const uri = databaseUri('stupa_migrations_first');
  const db = await openDatabase(uri);
  try {
    const before = await seed(db, ['usr_firstform0000000000'], 300);
    const files = db.files.model.collection;
    await files.dropIndex(TWIN_INDEX_NAME).catch(() => undefined);
    await files.insertOne({ ...before[0]!, _id: migratedFileId(before[0]!._id) } as never);
    await expandMigrations(db);
    await expectMoved(db, before);
    expect(await runMigrations(db, { logger, by: 'test' })).toMatchObject([{ key: FILE_IDS, changed: 0, done: true }, { done: true }]);
    // The index is this release's: a twin is refused by it.
    await expect(files.insertOne({ ...before[1]!, _id: 'fil_1111111111111111' } as never)).rejects.toThrow();
    expect(Object.keys(TWIN_INDEX)).toHaveLength(4);
  } finally {
    await db.connection.dropDatabase().catch(() => undefined);
    await db.close();
  }
}, 120_000);
