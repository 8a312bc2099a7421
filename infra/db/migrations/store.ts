// The `migrations` collection: one record per migration that has started, by its key
// (`0001-file-ids`), saying when it started, how far it got and when it was done.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';

export interface MigrationRecord {
  _id: string;
  state: 'running' | 'done';
  /** Records changed so far (by the background runs; a user's own records moved in their
   * request are not counted). */
  changed: number;
  /** Which process ran it last: `api@host:pid`. */
  by: string;
  startedAt: number;
  updatedAt: number;
  doneAt: number | null;
  /** The last failure of a run, until a run gets further. */
  error: string | null;
}

const schema = new Schema<MigrationRecord>(
  {
    _id: { type: String, required: true },
    state: { type: String, required: true },
    changed: { type: Number, required: true },
    by: { type: String, required: true },
    startedAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
    doneAt: { type: Number, default: null },
    error: { type: String, default: null },
  },
  { versionKey: false },
);

export function createMigrationStore(conn: Connection) {
  const Migrations: Model<MigrationRecord> = conn.model<MigrationRecord>('Migration', schema, 'migrations');
  const set = (key: string, fields: Partial<MigrationRecord>) =>
    Migrations.updateOne({ _id: key }, { $set: { ...fields, updatedAt: Date.now() } }).exec();
  return {
    model: Migrations,
    get: (key: string) => Migrations.findById(key).lean<MigrationRecord>().exec(),
    async isDone(key: string): Promise<boolean> {
      return (await Migrations.exists({ _id: key, state: 'done' })) !== null;
    },
    /** Every record: one per migration there is (a handful), never per data record. */
    all: () => Migrations.find({}).sort({ _id: 1 }).lean<MigrationRecord[]>().exec(),
    /** Records a run's start; a migration started before keeps its start and count. */
    async started(key: string, by: string): Promise<void> {
      const now = Date.now();
      await Migrations.updateOne(
        { _id: key },
        { $setOnInsert: { state: 'running', changed: 0, startedAt: now, doneAt: null }, $set: { by, updatedAt: now, error: null } },
        { upsert: true },
      ).exec();
    },
    progress: (key: string, changed: number) => set(key, { changed }),
    done: (key: string, changed: number) => set(key, { state: 'done', changed, doneAt: Date.now() }),
    failed: (key: string, error: string) => set(key, { error }),
  };
}

export type MigrationStore = ReturnType<typeof createMigrationStore>;
