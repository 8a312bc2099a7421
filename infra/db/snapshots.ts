import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { existenceHolder } from './holds.js';
import { after } from './pages.js';

/** A folder snapshot: the UnixFS directory of the folder at `takenAt`, and a hold on it. */
export interface SnapshotRecord {
  /** `<folderId>:<multihash>`: a folder has one snapshot per directory content. */
  _id: string;
  userId: string;
  folderId: string;
  cid: string;
  multihash: string;
  takenAt: number;
  fileCount: number;
  /** Bytes of the files it links (their stored sizes). */
  totalSize: number;
}

const schema = new Schema<SnapshotRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    folderId: { type: String, required: true },
    cid: { type: String, required: true },
    multihash: { type: String, required: true },
    takenAt: { type: Number, required: true },
    fileCount: { type: Number, required: true },
    totalSize: { type: Number, required: true },
  },
  { versionKey: false },
);
schema.index({ folderId: 1, takenAt: -1, _id: -1 });
schema.index({ multihash: 1 });

export const snapshotKey = (folderId: string, multihash: string) => `${folderId}:${multihash}`;

export function createSnapshotStore(conn: Connection) {
  const Snapshots: Model<SnapshotRecord> = conn.model<SnapshotRecord>('Snapshot', schema, 'snapshots');

  /** A snapshot holds its directory while its record exists (infra/db/holds.ts). */
  const holder = existenceHolder('snapshot', Snapshots, 'takenAt');

  return {
    model: Snapshots,
    holder,

    /** Records the snapshot; an existing one of the same content keeps its first `takenAt`. */
    async insert(snapshot: SnapshotRecord): Promise<SnapshotRecord> {
      const { _id, ...fields } = snapshot;
      const before = await Snapshots.findOneAndUpdate({ _id }, { $setOnInsert: fields }, { upsert: true, returnDocument: 'before' })
        .lean<SnapshotRecord>()
        .exec();
      return before ?? snapshot;
    },

    get: (key: string) => Snapshots.findById(key).lean<SnapshotRecord>().exec(),

    /** Newest first; `after` continues from the previous page's last item. */
    list(folderId: string, q: { after?: { takenAt: number; id: string }; limit: number }): Promise<SnapshotRecord[]> {
      const filter: Record<string, unknown> = { folderId };
      if (q.after) Object.assign(filter, after('takenAt', { at: q.after.takenAt, id: q.after.id }));
      return Snapshots.find(filter).sort({ takenAt: -1, _id: -1 }).limit(q.limit).lean<SnapshotRecord[]>().exec();
    },

    async delete(key: string): Promise<boolean> {
      return (await Snapshots.deleteOne({ _id: key }).exec()).deletedCount === 1;
    },
  };
}

export type SnapshotStore = ReturnType<typeof createSnapshotStore>;
