import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';

/** A folder. Minimal until the folders issue adds its endpoints: files can be moved into one. */
export interface FolderRecord {
  _id: string;
  userId: string;
  name: string;
  parentFolderId: string | null;
  createdAt: number;
  updatedAt: number;
}

const schema = new Schema<FolderRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true, index: true },
    name: { type: String, required: true },
    parentFolderId: { type: String, default: null },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false },
);

export function createFolderStore(conn: Connection) {
  const Folders: Model<FolderRecord> = conn.model<FolderRecord>('Folder', schema, 'folders');
  return {
    model: Folders,
    insert: (folder: FolderRecord) => Folders.create(folder),
    /** The folder if it is the user's; another user's folder is as good as missing. */
    async findForUser(userId: string, folderId: string): Promise<FolderRecord | null> {
      // By `_id` alone, the owner checked after (by-id.ts).
      const folder = await Folders.findById(folderId).lean<FolderRecord>().exec();
      return folder?.userId === userId ? folder : null;
    },
  };
}

export type FolderStore = ReturnType<typeof createFolderStore>;
