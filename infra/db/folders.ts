import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';
import { after } from './pages.js';

/** A folder of a user's files. Its path is derived from its parents, so moving or renaming a
 * folder never rewrites what it holds. */
export interface FolderRecord {
  /** `fld_` + 16 base62 characters. */
  _id: string;
  userId: string;
  name: string;
  /** null: at the top level. */
  parentFolderId: string | null;
  /** Files directly in the folder, counted as they come and go (core/folders.ts
   * fileMoved). Absent on folders made before it was counted: those count at each read. */
  fileCount?: number;
  /** The listing digest of the snapshot job last asked for (core/snapshots.ts), so its
   * status is found without listing the folder again. */
  snapshotDigest?: string;
  createdAt: number;
  updatedAt: number;
}

const schema = new Schema<FolderRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    name: { type: String, required: true },
    parentFolderId: { type: String, default: null },
    fileCount: { type: Number },
    snapshotDigest: { type: String },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false },
);
// Names are unique among siblings: an insert or rename that collides fails atomically (a
// unique index is the one constraint FerretDB 1.24 enforces under concurrency).
schema.index({ userId: 1, parentFolderId: 1, name: 1 }, { unique: true });
schema.index({ userId: 1, createdAt: -1, _id: -1 });
// A folder's page of subfolders; the unique index above cannot serve it: a unique index keeps
// FerretDB's JSON-text expressions, which its pushdown does not use (0002-pushdown.patch).
schema.index({ userId: 1, parentFolderId: 1, createdAt: -1, _id: -1 });
// A folder by name (the gateway's `/folders/<name>`), for the same reason: without it FerretDB
// would range over all the user's top-level folders for each such read.
schema.index({ userId: 1, name: 1 });

export interface FolderQuery {
  /** undefined: every folder of the user; null: the top level; else that folder's children. */
  parentFolderId?: string | null;
  after?: { createdAt: number; id: string };
  limit: number;
}

export function createFolderStore(conn: Connection) {
  const Folders: Model<FolderRecord> = conn.model<FolderRecord>('Folder', schema, 'folders');
  return {
    model: Folders,

    /** Inserts the folder; false when a sibling has its name. */
    async insert(folder: FolderRecord): Promise<boolean> {
      try {
        await Folders.create(folder);
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    /** The user's top-level folder of this name (names are unique among siblings). */
    topLevelByName: (userId: string, name: string) => Folders.findOne({ userId, parentFolderId: null, name }).lean<FolderRecord>().exec(),

    /** The folder if it is the user's; another user's folder is as good as missing. */
    async findForUser(userId: string, folderId: string): Promise<FolderRecord | null> {
      // By `_id` alone, the owner checked after (by-id.ts).
      const folder = await Folders.findById(folderId).lean<FolderRecord>().exec();
      return folder?.userId === userId ? folder : null;
    },

    /** Newest first; `after` continues from the previous page's last item. */
    list(userId: string, q: FolderQuery): Promise<FolderRecord[]> {
      const filter: Record<string, unknown> = { userId };
      if (q.parentFolderId !== undefined) filter.parentFolderId = q.parentFolderId;
      if (q.after) Object.assign(filter, after('createdAt', { at: q.after.createdAt, id: q.after.id }));
      return Folders.find(filter).sort({ createdAt: -1, _id: -1 }).limit(q.limit).lean<FolderRecord[]>().exec();
    },

    /** Adds `delta` to a counted folder's fileCount (one atomic update; a folder from before
     * counting, or one deleted meanwhile, is left alone). */
    async adjustFileCount(folderId: string, delta: number): Promise<void> {
      await Folders.updateOne({ _id: folderId, fileCount: { $exists: true } }, { $inc: { fileCount: delta } }).exec();
    },

    /** Sets a folder's fileCount to `to` if it is still `from` (the audit's repair, from a count
     * of its files); false when it changed meanwhile. */
    async setFileCount(folderId: string, from: number, to: number): Promise<boolean> {
      return (await Folders.updateOne({ _id: folderId, fileCount: from }, { $set: { fileCount: to } }).exec()).modifiedCount === 1;
    },

    /** Remembers the snapshot job last asked for. */
    async setSnapshotDigest(folderId: string, digest: string): Promise<void> {
      await Folders.updateOne({ _id: folderId }, { $set: { snapshotDigest: digest } }).exec();
    },

    /** Every folder of the user, for walking a tree in memory with one query. */
    allForUser: (userId: string) => Folders.find({ userId }).lean<FolderRecord[]>().exec(),

    /** Every child folder (recursive deletes walk the tree with it). */
    children: (userId: string, folderId: string) => Folders.find({ userId, parentFolderId: folderId }).lean<FolderRecord[]>().exec(),

    /** Renames or moves; null when missing, false when a sibling has the name. */
    async update(folderId: string, changes: Partial<Pick<FolderRecord, 'name' | 'parentFolderId'>>): Promise<FolderRecord | null | false> {
      try {
        return await Folders.findOneAndUpdate(
          { _id: folderId },
          { $set: { ...changes, updatedAt: Date.now() } },
          { returnDocument: 'after' },
        )
          .lean<FolderRecord>()
          .exec();
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    async delete(folderId: string): Promise<boolean> {
      return (await Folders.deleteOne({ _id: folderId }).exec()).deletedCount === 1;
    },
  };
}

export type FolderStore = ReturnType<typeof createFolderStore>;
