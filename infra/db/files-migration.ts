// Files from before file ids were keyed `<userId>:<multihash>`: one record per user and content,
// so the same bytes in two places were one file. The API migrates them before it serves: each
// gets a `fil_` id derived from its old key (so every migrating process writes the same copy,
// and a second run or a concurrent one is harmless), the copy is inserted before the old record
// goes (the content is held by one of the two at every moment, never by neither: holds.ts), and
// only then is the `twins` unique index built, which a copy beside its original would break.
// A marker in `counters` says it is done, so later starts read one document (and make sure of
// the index).
//
// Cost: one pass over the old records, a page of 1,000 at a time: one query and two bulk writes
// (an old record goes only once its copy is there). The pages are taken
// unsorted, and what a page migrated is gone from the next: on the stack's FerretDB a range of
// `_id`s sorted by `_id` is a scan and a sort of the whole table per page (measured: 0.8 s a
// page at 100,000 records), unsorted it stops at the first 1,000 (30 ms). Measured by
// `npm run bench -- --migrate` (docs/measurements.md).
import type { mongo } from 'mongoose';
import { hashedBase62 } from '../secrets.js';
import type { CounterStore } from './counters.js';
import type { FileRecord, FileStore } from './files.js';
import { FILE_ID_PREFIX, TWIN_INDEX, TWIN_INDEX_NAME } from './files.js';
import { isDuplicateKey } from './errors.js';

const PAGE = 1000;
export const MIGRATION_MARKER = 'migration:file-ids';

/** The id a file from before file ids gets: a function of its old key, 16 base62 characters. */
export const migratedFileId = (oldKey: string): string => FILE_ID_PREFIX + hashedBase62(`file-id:${oldKey}`, 16);

// Every id outside the `fil_` range is an old key (theirs start with the user's `usr_`).
const OLD_RANGES = [{ $lt: FILE_ID_PREFIX }, { $gte: 'fil`' }];

/**
 * Inserts the copies and returns the old records whose copies are there now: inserted, or
 * refused as a duplicate `_id` (another run wrote it; with old records left, `_id` is the one
 * unique index). Read from the insert's own answer: on the stack's FerretDB a read back by
 * `_id: {$in}` scans the table (0.7 s a page at 100,000 records).
 */
async function insertCopies(files: FileStore, page: FileRecord[]): Promise<FileRecord[]> {
  const copies = page.map((old) => ({ ...old, _id: migratedFileId(old._id) }));
  try {
    // The driver's own insert: no mongoose document per record (the records are read as stored).
    const collection = files.model.collection as unknown as mongo.Collection<FileRecord>;
    await collection.insertMany(copies, { ordered: false });
    return page;
  } catch (err) {
    const writeErrors = (err as { writeErrors?: { index: number; code?: number; errmsg?: string }[] }).writeErrors;
    if (!writeErrors) throw err;
    const failed = new Set(writeErrors.filter((e) => !isDuplicateKey({ code: e.code, message: e.errmsg })).map((e) => e.index));
    return page.filter((_, i) => !failed.has(i));
  }
}

/** Migrates one page of old records; returns how many went (0: none could, now). */
async function migratePage(files: FileStore, page: FileRecord[]): Promise<number> {
  const copied = await insertCopies(files, page);
  if (copied.length === 0) return 0;
  // Each delete by `_id` alone: an index lookup on any server.
  await files.model.bulkWrite(
    copied.map((old) => ({ deleteOne: { filter: { _id: old._id } } })),
    { ordered: false },
  );
  return copied.length;
}

export interface MigrationReport {
  migrated: number;
  /** Old records whose copies could not be written now (left for the next start). */
  left: number;
  ms: number;
}

/** Gives every file from before file ids its own id, then builds the `twins` index. */
export async function migrateFileIds(
  db: { files: FileStore; counters: CounterStore },
  progress?: (migrated: number) => void,
): Promise<MigrationReport> {
  const started = Date.now();
  const { files } = db;
  const buildIndex = () => files.model.collection.createIndex(TWIN_INDEX, { unique: true, name: TWIN_INDEX_NAME });
  if (await db.counters.model.exists({ _id: MIGRATION_MARKER })) {
    await buildIndex(); // there already, unless dropped by hand: then built again
    return { migrated: 0, left: 0, ms: Date.now() - started };
  }
  // A unique index built already (a test, an interrupted run) would refuse each copy as its
  // original's twin: with old records left, it goes until they have.
  const anyOld = await Promise.all(OLD_RANGES.map((range) => files.model.exists({ _id: range })));
  if (anyOld.some(Boolean)) await files.model.collection.dropIndex(TWIN_INDEX_NAME).catch(() => undefined);
  let migrated = 0;
  let left = 0;
  for (const range of OLD_RANGES) {
    for (;;) {
      const page = await files.model.find({ _id: range }).limit(PAGE).lean<FileRecord[]>().exec();
      if (page.length === 0) break;
      const moved = await migratePage(files, page);
      migrated += moved;
      progress?.(migrated);
      if (moved === 0) {
        left += page.length;
        break;
      }
    }
  }
  await buildIndex();
  if (left === 0) await db.counters.model.updateOne({ _id: MIGRATION_MARKER }, { $set: { n: 1 } }, { upsert: true }).exec();
  return { migrated, left, ms: Date.now() - started };
}
