import type { Connection, Model, QueryFilter } from 'mongoose';
import { Schema } from 'mongoose';
import { randomBase62 } from '../secrets.js';
import { groupCommit, insertUnordered, type Outcome } from './batch.js';
import { coalesceReads } from './by-id.js';
import { isDuplicateKey, resending } from './errors.js';
import { UNANSWERED_WRITE_RESEND_MS } from '../constants.js';
import { existenceHolder } from './holds.js';
import { after } from './pages.js';
import { count } from './count.js';

/**
 * A file: a user's record of content, with its own id, name, folder and metadata. The same
 * content may be any number of files of one user (the same logo in two folders, empty files
 * under many names); storage counts it once (usage.ts) and each file holds it (holds.ts).
 * One rule: no two files of a user are the same content under the same name in the same
 * folder (the `twins` unique index), so an upload repeated is the same file, not a copy.
 */
export interface FileRecord {
  /** `fil_` + 16 base62 characters. */
  _id: string;
  userId: string;
  cid: string;
  multihash: string;
  name: string;
  description: string | null;
  size: number;
  /** The cumulative size of the content's blocks, linking it into a snapshot's directory
   * (infra/ipfs/unixfs.ts); null for records from before it was kept. */
  dagSize?: number | null;
  mimeType: string;
  folderId: string | null;
  metadata: Record<string, string>;
  createdAt: number;
  updatedAt: number;
}

export const FILE_ID_PREFIX = 'fil_';
export const newFileId = () => `${FILE_ID_PREFIX}${randomBase62(16)}`;
export const looksLikeFileId = (text: string) => /^fil_[0-9A-Za-z]{16}$/.test(text);

/** The fields of the unique index that makes an upload repeated the same file. */
export const TWIN_INDEX = { userId: 1, folderId: 1, name: 1, multihash: 1 } as const;
export const TWIN_INDEX_NAME = 'twins';

const schema = new Schema<FileRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    cid: { type: String, required: true },
    multihash: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    size: { type: Number, required: true },
    dagSize: { type: Number, default: null },
    mimeType: { type: String, required: true },
    folderId: { type: String, default: null },
    metadata: { type: Schema.Types.Mixed, default: {} },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
schema.index({ userId: 1, createdAt: -1, _id: -1 });
schema.index({ userId: 1, folderId: 1, createdAt: -1, _id: -1 });
// A user's files of one content, newest first: GET /file/:cid, the CID routes' one-or-409, a
// list by CID, and the twin an upload repeats (the unique index cannot serve reads on FerretDB:
// folders.ts).
schema.index({ userId: 1, multihash: 1, createdAt: -1, _id: -1 });
schema.index({ multihash: 1 });
// The `twins` unique index is not declared here: migration 1 builds it (migrations/0001-file-ids.ts).

export interface FileQuery {
  folderId?: string | null;
  multihash?: string;
  name?: string;
  mimeType?: string;
  from?: number;
  to?: number;
  /** The last item of the previous page. */
  after?: { createdAt: number; id: string };
  limit: number;
}

/** What a file's own changes may touch. */
export type FileChanges = Partial<Pick<FileRecord, 'name' | 'folderId'>>;

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const NEWEST = { createdAt: -1, _id: -1 } as const;
/** Tries of an upload whose twin vanished between its refused insert and the update. */
const INSERT_TRIES = 3;

export function createFileStore(conn: Connection) {
  const Files: Model<FileRecord> = conn.model<FileRecord>('File', schema, 'files');
  /** A file holds its content while it exists (infra/db/holds.ts). */
  const holder = existenceHolder('file', Files, 'createdAt');
  // What a user's reads wait for first: while migration 1 runs, their records from before file
  // ids moving to their ids (migrations/0001-file-ids.ts). Reads by id alone come after one of
  // these (a request reads the record before it changes it).
  let gate = (_userId: string): Promise<void> | void => undefined;
  const getShared = coalesceReads((id: string) => Files.findById(id).lean<FileRecord>().exec());
  // A user's newest files of a content: polled like a pin's status (GET /file/:cid), so
  // concurrent reads of the same share a database read too.
  const newestOf = coalesceReads((key: string) => {
    const [userId, multihash, limit] = key.split(' ') as [string, string, string];
    return Files.find({ userId, multihash }).sort(NEWEST).limit(Number(limit)).lean<FileRecord[]>().exec();
  });
  // By the {userId, multihash} index: the unique index cannot serve reads on FerretDB (folders.ts).
  const twinFilter = (f: Pick<FileRecord, 'userId' | 'folderId' | 'name' | 'multihash'>) => ({
    userId: f.userId,
    multihash: f.multihash,
    folderId: f.folderId,
    name: f.name,
  });

  /** One insert by itself, with the twin rule of `insert`. */
  async function insertOne(file: FileRecord): Promise<{ file: FileRecord; created: boolean }> {
    for (let tries = 1; ; tries++) {
      try {
        await resending(() => Files.create(file), UNANSWERED_WRITE_RESEND_MS);
        return { file, created: true };
      } catch (err) {
        if (!isDuplicateKey(err) || tries === INSERT_TRIES) throw err;
      }
      const { description, metadata, mimeType, size, dagSize, updatedAt } = file;
      const set = { description, metadata, mimeType, size, dagSize, updatedAt };
      const same = await Files.findOneAndUpdate(twinFilter(file), { $set: set }, { returnDocument: 'after' }).lean<FileRecord>().exec();
      // Its own id: an earlier sending of this very insert was stored (its answer was lost).
      if (same) return { file: same, created: same._id === file._id };
      // Gone between the two writes (deleted): insert again.
    }
  }

  // Uploads that arrive together are inserted with one command (batch.ts); one whose insert
  // meets a twin (or a twin in the same batch, or itself: an earlier sending whose answer was
  // lost) takes the one-by-one way. A sending whose connection closed under it is sent again
  // (resending): the ids are fixed, so nothing is stored twice, and an upload is not refused
  // for a record that was stored (measured by npm run chaos: with neither, a FerretDB killed
  // under a batch left uploads acknowledged without their records).
  const insertTogether = groupCommit(async (batch: FileRecord[]) => {
    const outcomes = await resending(() => insertUnordered(Files, batch), UNANSWERED_WRITE_RESEND_MS);
    const results: Outcome<{ file: FileRecord; created: boolean }>[] = [];
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome === 'inserted') results.push({ file: batch[i]!, created: true });
      else if (outcome instanceof Error) results.push(outcome);
      else results.push(await insertOne(batch[i]!).catch((err: Error) => err));
    }
    return results;
  });

  return {
    model: Files,
    holder,

    /**
     * Inserts the file, unless the user has it already (the same content under the same name in
     * the same folder): then that file takes this one's description, metadata and type, and
     * keeps its id and creation time. `created` says which. Written by the driver as given (the
     * type has every field the schema has).
     */
    useGate(fn: (userId: string) => Promise<void>) {
      gate = fn;
    },

    async insert(file: FileRecord): Promise<{ file: FileRecord; created: boolean }> {
      await gate(file.userId);
      return insertTogether({ dagSize: null, ...file });
    },

    /** The user's file by id; another user's file is as good as missing. Concurrent reads of
     * one file share a database read (by-id.ts); the record is shared, not to be modified. */
    async byId(userId: string, fileId: string): Promise<FileRecord | null> {
      await gate(userId);
      const file = await getShared(fileId);
      return file?.userId === userId ? file : null;
    },

    /** The user's newest files of the content, at most `limit`, newest first (shared: not to
     * be modified). */
    async ofContent(userId: string, multihash: string, limit: number) {
      await gate(userId);
      return newestOf(`${userId} ${multihash} ${limit}`);
    },

    async countOfContent(userId: string, multihash: string) {
      await gate(userId);
      return count(Files, { userId, multihash });
    },

    /** The user's file of the same content under the same name in the same folder, if any. */
    async twin(f: Pick<FileRecord, 'userId' | 'folderId' | 'name' | 'multihash'>) {
      await gate(f.userId);
      return Files.findOne(twinFilter(f)).lean<FileRecord>().exec();
    },

    /**
     * The record after the change and before it (to see where it moved from); null when it
     * does not exist, false when the change would make it a twin of another file.
     */
    async update(fileId: string, changes: FileChanges): Promise<{ file: FileRecord; previous: FileRecord } | null | false> {
      const set = { ...changes, updatedAt: Date.now() };
      try {
        const previous = await Files.findOneAndUpdate({ _id: fileId }, { $set: set }, { returnDocument: 'before' })
          .lean<FileRecord>()
          .exec();
        return previous && { file: { ...previous, ...set }, previous };
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    /** Deletes the record; returns what was deleted (null: nothing was), so that whoever
     * deleted it, and only they, give back its size (usage.ts). */
    delete: (fileId: string) => Files.findOneAndDelete({ _id: fileId }).lean<FileRecord>().exec(),

    /** Every file directly in any of these folders (a snapshot's listing, in one query). */
    async inFolders(userId: string, folderIds: string[]) {
      await gate(userId);
      return Files.find({ userId, folderId: { $in: folderIds } })
        .lean<FileRecord[]>()
        .exec();
    },

    /** Every file directly in the folder (recursive deletes read them all). */
    async inFolder(userId: string, folderId: string) {
      await gate(userId);
      return Files.find({ userId, folderId }).lean<FileRecord[]>().exec();
    },

    async countInFolder(userId: string, folderId: string) {
      await gate(userId);
      return count(Files, { userId, folderId });
    },

    /** Newest first; `after` continues from the previous page's last item. */
    async list(userId: string, q: FileQuery): Promise<FileRecord[]> {
      await gate(userId);
      const filter: QueryFilter<FileRecord> = { userId };
      if (q.folderId !== undefined) filter.folderId = q.folderId;
      if (q.multihash !== undefined) filter.multihash = q.multihash;
      if (q.name) filter.name = { $regex: escapeRegex(q.name), $options: 'i' };
      if (q.mimeType) {
        filter.mimeType = q.mimeType.endsWith('/*') ? { $regex: `^${escapeRegex(q.mimeType.slice(0, -1))}` } : q.mimeType;
      }
      const and: QueryFilter<FileRecord>[] = [];
      if (q.from !== undefined) and.push({ createdAt: { $gte: q.from } });
      if (q.to !== undefined) and.push({ createdAt: { $lt: q.to } });
      if (q.after) and.push(after('createdAt', { at: q.after.createdAt, id: q.after.id }));
      if (and.length) filter.$and = and;
      return Files.find(filter).sort(NEWEST).limit(q.limit).lean<FileRecord[]>().exec();
    },
  };
}

export type FileStore = ReturnType<typeof createFileStore>;
