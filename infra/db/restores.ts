// The restores of this database from a backup: when each backup was taken and when it was
// restored (ms). A MongoDB restored from a backup forgets the records written after the backup
// was taken, while Cluster keeps their pins; the audit reads these windows to keep such pins
// rather than unpin them as strays (activities/audit/content.ts, core/restores.ts).
//
// The restore itself rewrites this collection with the backup's: a restore recorded after that
// backup is forgotten with it. Nothing is lost by that: its window ended after the backup was
// taken, and the new restore's window starts at the backup and runs to now.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { RESTORES_READ } from '../constants.js';

export interface RestoreRecord {
  /** `<takenAt>:<restoredAt>`: the same restore recorded twice is one document. */
  _id: string;
  /** When the backup was taken (ms). */
  takenAt: number;
  /** When it was restored (ms). */
  restoredAt: number;
}

const schema = new Schema<RestoreRecord>(
  {
    _id: { type: String, required: true },
    takenAt: { type: Number, required: true },
    restoredAt: { type: Number, required: true },
  },
  { versionKey: false },
);
schema.index({ restoredAt: -1 });

export function createRestoreStore(conn: Connection) {
  const Restores: Model<RestoreRecord> = conn.model<RestoreRecord>('Restore', schema, 'restores');
  return {
    model: Restores,

    /** Records a restore (once: recording it again changes nothing). Times in ms. */
    async record(takenAt: number, restoredAt: number): Promise<RestoreRecord> {
      const restore = { _id: `${takenAt}:${restoredAt}`, takenAt, restoredAt };
      await Restores.updateOne({ _id: restore._id }, { $setOnInsert: { takenAt, restoredAt } }, { upsert: true }).exec();
      return restore;
    },

    /** Every restore, the newest first: one document per restore ever made, so one read; capped
     * at RESTORES_READ all the same (an older window than those is long past). */
    async all(): Promise<RestoreRecord[]> {
      return Restores.find({}).sort({ restoredAt: -1 }).limit(RESTORES_READ).lean<RestoreRecord[]>().exec();
    },
  };
}

export type RestoreStore = ReturnType<typeof createRestoreStore>;
