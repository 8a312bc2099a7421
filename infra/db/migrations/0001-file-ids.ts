// Migration 1: files from before file ids were keyed `<userId>:<multihash>` (one record per
// user and content); each gets a `fil_` id derived from its old key, so every process that
// moves a record writes the same copy. It used to run before the API served (13 minutes at a
// million records, measured); now it runs in the background, and this release reads both
// shapes by moving a user's records first whenever it meets that user (`fileIdsGate`).
//
// The `twins` unique index (files.ts) is built before serving (expand): the release before
// never made two records of one content for a user, so the old records satisfy it. A copy
// beside its original would not, so a record moves in four writes, each of a page at once:
//   1. the copy is inserted in a placeholder folder of its own (`\0<old key>\0<folder>`),
//   2. the original is deleted (until now the original held the content, now the copy does:
//      one of them holds it at every moment, never neither; holds.ts),
//   3. the copy goes back to the folder its placeholder names,
//   4. the page's entries in `filemigrations`, written before 1, are deleted.
// A process killed between them leaves entries there, and placeholders that name what is left
// to do; `finishInterrupted` does it (the background run at its start and end, a user's first
// request by the placeholders in their {userId, folderId} index range).
import type { Connection, mongo } from 'mongoose';
import { hashedBase62 } from '../../secrets.js';
import type { CounterStore } from '../counters.js';
import { isDuplicateKey } from '../errors.js';
import type { FileRecord, FileStore } from '../files.js';
import { FILE_ID_PREFIX, TWIN_INDEX, TWIN_INDEX_NAME } from '../files.js';
import type { Migration, MigrationContext } from './migration.js';
import type { MigrationStore } from './store.js';
import { migrationKey } from './migration.js';

// Each of a page's writes holds the database's writer for its length on SQLite (the local
// stack's FerretDB), so uploads wait behind it: pages of 1,000 took upload p99 from 73 to 531 ms
// while the migration ran (npm run bench -- --migrate); smaller pages keep each wait short.
const PAGE = 250;
/** Set by the migration's first form, which ran before serving: a database it finished. */
export const FIRST_FORM_DONE = 'migration:file-ids';

/** The id a file from before file ids gets: a function of its old key, 16 base62 characters. */
export const migratedFileId = (oldKey: string): string => FILE_ID_PREFIX + hashedBase62(`file-id:${oldKey}`, 16);

// Every id outside the `fil_` range is an old key (theirs start with the user's `usr_`).
const OLD_RANGES = [{ $lt: FILE_ID_PREFIX }, { $gte: 'fil`' }];
/** One user's old keys: `<userId>:` up to, not including, `<userId>;`. */
const oldKeysOf = (userId: string) => ({ $gte: `${userId}:`, $lt: `${userId};` });
/** Placeholder folders sort before every folder id and after null. */
const PLACEHOLDERS = { $gte: '\0', $lt: '\u0001' };
const placeholder = (old: FileRecord) => `\0${old._id}\0${old.folderId ?? ''}`;
function fromPlaceholder(folderId: string): { oldKey: string; folderId: string | null } {
  const [, oldKey = '', folder = ''] = folderId.split('\0');
  return { oldKey, folderId: folder === '' ? null : folder };
}

// What this migration uses of the database (infra/db/index.ts, which wires the gate, is not
// imported: it imports this).
type Db = { files: FileStore; connection: Connection };
type MigrationDb = Db & { counters: CounterStore; migrations: MigrationStore };
interface LogEntry {
  _id: string;
  oldKey: string;
}
const collection = <T extends mongo.Document>(db: Db, name: string) => db.connection.collection<T>(name);
const filesOf = (db: Db) => db.files.model.collection as unknown as mongo.Collection<FileRecord>;
const logOf = (db: Db) => collection<LogEntry>(db, 'filemigrations');

/** Inserts, taking a duplicate `_id` as there already (an earlier or a concurrent run wrote it). */
async function insertOnce<T extends { _id: string }>(target: mongo.Collection<T>, docs: T[]): Promise<void> {
  try {
    await target.insertMany(docs as mongo.OptionalUnlessRequiredId<T>[], { ordered: false });
  } catch (err) {
    const writeErrors = (err as { writeErrors?: { code?: number; errmsg?: string }[] }).writeErrors;
    if (!writeErrors || writeErrors.some((e) => !isDuplicateKey({ code: e.code, message: e.errmsg }))) throw err;
  }
}

/** Steps 2 and 3 for copies in placeholder folders: each original goes, then each copy returns.
 * By `_id $in`, and the copies a folder at a time: FerretDB looks each id up in its index, where
 * a bulk of single deletes and updates by `_id` cost most of the first form's time. */
async function settle(db: Db, copies: { _id: string; folderId: string }[]): Promise<void> {
  if (copies.length === 0) return;
  const files = filesOf(db);
  const back = copies.map((c) => ({ _id: c._id, ...fromPlaceholder(c.folderId) }));
  await files.deleteMany({ _id: { $in: back.map((c) => c.oldKey) } });
  const byFolder = new Map<string | null, string[]>();
  for (const c of back) byFolder.set(c.folderId, [...(byFolder.get(c.folderId) ?? []), c._id]);
  for (const [folderId, ids] of byFolder) {
    try {
      await files.updateMany({ _id: { $in: ids }, folderId: PLACEHOLDERS }, { $set: { folderId } });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      // A twin made meanwhile in that folder (no request of this user runs while its records
      // move, so only by hand): the twin holds the content, and the copy goes.
      for (const _id of ids)
        await files.updateOne({ _id, folderId: PLACEHOLDERS }, { $set: { folderId } }).catch(async (e: unknown) => {
          if (!isDuplicateKey(e)) throw e;
          await files.deleteOne({ _id });
        });
    }
  }
}

/** Moves a page of old records (the four writes above); returns how many. */
async function movePage(db: Db, page: FileRecord[]): Promise<number> {
  const copies = page.map((old) => ({ ...old, _id: migratedFileId(old._id), folderId: placeholder(old) }));
  const ids = copies.map((c) => c._id);
  await insertOnce(
    logOf(db),
    page.map((old, i) => ({ _id: ids[i]!, oldKey: old._id })),
  );
  await insertOnce(filesOf(db), copies);
  // A copy an earlier run settled already is left as it is: only placeholders are settled.
  await settle(db, copies);
  await logOf(db).deleteMany({ _id: { $in: ids } });
  return page.length;
}

/** What runs killed between their writes left: the log's entries, a page at a time. */
async function finishInterrupted(db: Db): Promise<void> {
  for (;;) {
    const entries = await logOf(db).find({}).limit(PAGE).toArray();
    if (entries.length === 0) return;
    const ids = entries.map((e) => e._id);
    // A copy never inserted leaves its original in place: the pass over old records moves it.
    const copies = await filesOf(db)
      .find({ _id: { $in: ids } }, { projection: { folderId: 1 } })
      .toArray();
    await settle(
      db,
      copies.filter((c): c is FileRecord & { folderId: string } => typeof c.folderId === 'string' && c.folderId.startsWith('\0')),
    );
    await logOf(db).deleteMany({ _id: { $in: ids } });
  }
}

/** Moves one user's old records and settles their placeholders: by their indexes, O(their records). */
async function moveUser(db: Db, userId: string): Promise<void> {
  const files = filesOf(db);
  for (;;) {
    const left = await files
      .find({ userId, folderId: PLACEHOLDERS }, { projection: { folderId: 1 } })
      .limit(PAGE)
      .toArray();
    if (left.length === 0) break;
    await settle(db, left as { _id: string; folderId: string }[]);
  }
  for (;;) {
    const page = await files
      .find({ userId, _id: oldKeysOf(userId) })
      .limit(PAGE)
      .toArray();
    if (page.length === 0) return;
    await movePage(db, page);
  }
}

/**
 * What every file read of a user waits for while the migration runs: that user's records moved
 * (once per process and user; nothing once the migration is done, checked every 5 s until then).
 */
export function fileIdsGate(db: Db & { migrations: MigrationStore }): (userId: string) => Promise<void> {
  const key = migrationKey(fileIds);
  let done = false;
  let checkedAt = 0;
  const moved = new Set<string>();
  const moving = new Map<string, Promise<void>>();
  return async (userId) => {
    if (done || moved.has(userId)) return;
    if (Date.now() - checkedAt > 5_000) {
      checkedAt = Date.now();
      done = await db.migrations.isDone(key);
      if (done) return moved.clear();
    }
    let move = moving.get(userId);
    if (!move) {
      move = moveUser(db, userId).finally(() => moving.delete(userId));
      moving.set(userId, move);
    }
    await move;
    // Memory stays bounded in a long migration of many users: those forgotten are asked again.
    if (moved.size >= 100_000) moved.clear();
    moved.add(userId);
  };
}

async function buildTwinIndex(db: Db): Promise<void> {
  await db.files.model.collection.createIndex(TWIN_INDEX, { unique: true, name: TWIN_INDEX_NAME });
}

export const fileIds: Migration<MigrationDb> = {
  id: 1,
  name: 'file-ids',
  async expand(db) {
    try {
      await buildTwinIndex(db);
    } catch (err) {
      if (!isDuplicateKey(err) && !/duplicate|UNIQUE/i.test((err as Error).message)) throw err;
      // Copies beside their originals: the first form of this migration was killed between
      // its two writes. Moving the rest first (before serving, this once) lets the index build.
      await moveAll(db);
      await buildTwinIndex(db);
    }
  },
  async migrate(db, ctx) {
    if (await db.counters.model.exists({ _id: FIRST_FORM_DONE })) return 0;
    return moveAll(db, ctx);
  },
};

/**
 * The pass over every old record, a page at a time. Pages are taken unsorted, and what a page
 * moved is gone from the next: on the stack's FerretDB an `_id` range sorted by `_id` is a scan
 * and a sort of the whole table per page (0.8 s a page at 100,000 records); unsorted it stops
 * at the first page's worth (30 ms for 1,000).
 */
async function moveAll(db: Db, ctx?: MigrationContext): Promise<number> {
  await finishInterrupted(db);
  let changed = 0;
  for (const range of OLD_RANGES) {
    for (;;) {
      if (ctx?.signal.aborted) return changed;
      const page = await filesOf(db).find({ _id: range }).limit(PAGE).toArray();
      if (page.length === 0) break;
      changed += await movePage(db, page);
      await ctx?.progress(changed);
    }
  }
  await finishInterrupted(db);
  return changed;
}
