// Files from before file ids were keyed `<userId>:<multihash>`: one record per user and content,
// so the same bytes in two places were one file. The API migrates them before it serves: each
// gets a `fil_` id derived from its old key (so every migrating process writes the same copy,
// and a second run or a concurrent one is harmless), the copy is inserted before the old record
// goes (the content is held by one of the two at every moment, never by neither: holds.ts), and
// only then is the `twins` unique index built, which a copy beside its original would break.
//
// Cost: one pass over the old records in pages by `_id` range (an index seek each), two bulk
// writes and a read of the copies per page (an old record goes only once its copy is there); a
// start with nothing to migrate costs two index seeks and the index check.
// Measured by `npm run bench -- --migrate` (README).
import crypto from 'node:crypto';
import type { FileRecord, FileStore } from './files.js';
import { FILE_ID_PREFIX, TWIN_INDEX, TWIN_INDEX_NAME } from './files.js';
import { isDuplicateKey } from './errors.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const PAGE = 1000;

/** The id a file from before file ids gets: a function of its old key, 16 base62 characters. */
export function migratedFileId(oldKey: string): string {
  const bytes = crypto.createHash('sha256').update(`file-id:${oldKey}`).digest();
  let id = '';
  for (let i = 0; id.length < 16; i++) id += BASE62[bytes[i]! % 62];
  return `${FILE_ID_PREFIX}${id}`;
}

// Every id outside the `fil_` range is an old key (theirs start with the user's `usr_`).
const OLD_RANGES = [{ $lt: FILE_ID_PREFIX }, { $gte: 'fil`' }] as const;

/** Every old record in the range's pages, handed on a page at a time. */
async function* oldPages(files: FileStore, range: (typeof OLD_RANGES)[number]) {
  for (let last: string | undefined; ;) {
    const bound = last === undefined ? range : { ...range, $gt: last };
    const page = await files.model.find({ _id: bound }).sort({ _id: 1 }).limit(PAGE).lean<FileRecord[]>().exec();
    if (page.length === 0) return;
    yield page;
    last = page.at(-1)!._id;
  }
}

/** Inserts the copies; a copy another run inserted already is fine. */
async function insertCopies(files: FileStore, copies: FileRecord[]): Promise<void> {
  try {
    await files.model.insertMany(copies, { ordered: false });
  } catch (err) {
    // Whatever was refused, only old records whose copies exist are deleted (below).
    if (!isDuplicateKey(err) && !(err as { writeErrors?: unknown[] }).writeErrors?.length) throw err;
  }
}

async function dropTwinIndex(files: FileStore): Promise<void> {
  try {
    await files.model.collection.dropIndex(TWIN_INDEX_NAME);
  } catch {
    // Not there: nothing to drop.
  }
}

export interface MigrationReport {
  migrated: number;
  ms: number;
}

/** Gives every file from before file ids its own id, then builds the `twins` index. */
export async function migrateFileIds(files: FileStore, progress?: (migrated: number) => void): Promise<MigrationReport> {
  const started = Date.now();
  let migrated = 0;
  const anyOld = await Promise.all(OLD_RANGES.map((range) => files.model.exists({ _id: range })));
  // Old records beside a built index (written by a process of the version before, still running
  // while this one started): a copy would be refused as its original's twin, so the index goes
  // until they are migrated.
  if (anyOld.some(Boolean)) await dropTwinIndex(files);
  for (const [i, range] of OLD_RANGES.entries()) {
    if (!anyOld[i]) continue;
    for await (const page of oldPages(files, range)) {
      const copies = page.map((old) => ({ ...old, _id: migratedFileId(old._id) }));
      await insertCopies(files, copies);
      const copied = await files.model
        .find({ _id: { $in: copies.map((c) => c._id) } }, { _id: 1 })
        .lean<{ _id: string }[]>()
        .exec();
      const done = new Set(copied.map((c) => c._id));
      const deletes = page.filter((old) => done.has(migratedFileId(old._id)));
      if (deletes.length > 0) {
        await files.model.bulkWrite(
          deletes.map((old) => ({ deleteOne: { filter: { _id: old._id } } })),
          { ordered: false },
        );
      }
      migrated += deletes.length;
      progress?.(migrated);
    }
  }
  await files.model.collection.createIndex(TWIN_INDEX, { unique: true, name: TWIN_INDEX_NAME });
  return { migrated, ms: Date.now() - started };
}
