import type { Connection, Model, QueryFilter } from 'mongoose';
import { Schema } from 'mongoose';
import { coalesceReads, userContentKey } from './by-id.js';
import { isDuplicateKey } from './errors.js';
import { existenceHolder } from './holds.js';
import { after } from './pages.js';
import { count } from './count.js';

export interface FileRecord {
  /** `<userId>:<multihash>` (by-id.ts): a user has one file record per piece of content;
   * uploading the same bytes again updates it. */
  _id: string;
  userId: string;
  cid: string;
  multihash: string;
  name: string;
  description: string | null;
  size: number;
  /** The cumulative size of the content's blocks, linking it into a snapshot's directory
   * (infra/unixfs.ts); null for records from before it was kept. */
  dagSize?: number | null;
  mimeType: string;
  folderId: string | null;
  metadata: Record<string, string>;
  createdAt: number;
  updatedAt: number;
}

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
schema.index({ multihash: 1 });

export interface FileQuery {
  folderId?: string | null;
  name?: string;
  mimeType?: string;
  from?: number;
  to?: number;
  /** The last item of the previous page. */
  after?: { createdAt: number; id: string };
  limit: number;
}

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function createFileStore(conn: Connection) {
  const Files: Model<FileRecord> = conn.model<FileRecord>('File', schema, 'files');
  /** A file holds its content while it exists (infra/db/holds.ts). */
  const holder = existenceHolder('file', Files);
  const getShared = coalesceReads((key: string) => Files.findById(key).lean<FileRecord>().exec());
  return {
    model: Files,
    holder,

    /** Inserts the file, or updates the user's record of the same content. `previous` is the
     * record before the update (null when inserted). */
    async upsert(file: FileRecord): Promise<{ file: FileRecord; previous: FileRecord | null }> {
      const { _id, createdAt, ...changes } = file;
      const write = () =>
        Files.findOneAndUpdate({ _id }, { $set: changes, $setOnInsert: { createdAt } }, { upsert: true, returnDocument: 'before' })
          .lean<FileRecord>()
          .exec();
      let previous: FileRecord | null;
      try {
        previous = await write();
      } catch (err) {
        // Two uploads of the same content both inserted: the other's record exists now, so
        // this one is an update of it. (MongoDB retries such an upsert itself; FerretDB 1.24
        // reports the unique `_id`.)
        if (!isDuplicateKey(err)) throw err;
        previous = await write();
      }
      return { file: previous ? { ...file, createdAt: previous.createdAt } : file, previous };
    },

    /** Concurrent reads of one record share a database read (by-id.ts: clients polling a file
     * cost one read per turn); the record is shared, not to be modified. */
    findForUser: (userId: string, multihash: string) => getShared(userContentKey(userId, multihash)),

    /** The record after the change and before it (to see where it moved from), or null. */
    async update(
      userId: string,
      multihash: string,
      changes: Partial<Pick<FileRecord, 'name' | 'folderId'>>,
    ): Promise<{ file: FileRecord; previous: FileRecord } | null> {
      const set = { ...changes, updatedAt: Date.now() };
      const previous = await Files.findOneAndUpdate({ _id: userContentKey(userId, multihash) }, { $set: set }, { returnDocument: 'before' })
        .lean<FileRecord>()
        .exec();
      return previous && { file: { ...previous, ...set }, previous };
    },

    /** Deletes the record; returns what was deleted (null: nothing was), so that whoever
     * deleted it, and only they, give back its size (usage.ts). */
    delete: (key: string) => Files.findOneAndDelete({ _id: key }).lean<FileRecord>().exec(),

    /** Every file directly in any of these folders (a snapshot's listing, in one query). */
    inFolders: (userId: string, folderIds: string[]) =>
      Files.find({ userId, folderId: { $in: folderIds } })
        .lean<FileRecord[]>()
        .exec(),

    /** Every file directly in the folder (recursive deletes read them all). */
    inFolder: (userId: string, folderId: string) => Files.find({ userId, folderId }).lean<FileRecord[]>().exec(),

    countInFolder: (userId: string, folderId: string) => count(Files, { userId, folderId }),

    /** Newest first; `after` continues from the previous page's last item. */
    list(userId: string, q: FileQuery): Promise<FileRecord[]> {
      const filter: QueryFilter<FileRecord> = { userId };
      if (q.folderId !== undefined) filter.folderId = q.folderId;
      if (q.name) filter.name = { $regex: escapeRegex(q.name), $options: 'i' };
      if (q.mimeType) {
        filter.mimeType = q.mimeType.endsWith('/*') ? { $regex: `^${escapeRegex(q.mimeType.slice(0, -1))}` } : q.mimeType;
      }
      const and: QueryFilter<FileRecord>[] = [];
      if (q.from !== undefined) and.push({ createdAt: { $gte: q.from } });
      if (q.to !== undefined) and.push({ createdAt: { $lt: q.to } });
      if (q.after) and.push(after('createdAt', { at: q.after.createdAt, id: q.after.id }));
      if (and.length) filter.$and = and;
      return Files.find(filter).sort({ createdAt: -1, _id: -1 }).limit(q.limit).lean<FileRecord[]>().exec();
    },
  };
}

export type FileStore = ReturnType<typeof createFileStore>;
