import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { isDuplicateKey } from './errors.js';

/** One rule of a CORS configuration, in S3's model and with S3's field names. */
export interface CorsRule {
  AllowedOrigins: string[];
  AllowedMethods: string[];
  AllowedHeaders?: string[];
  ExposeHeaders?: string[];
  MaxAgeSeconds?: number;
  ID?: string;
}

/**
 * A folder's (a bucket's) CORS configuration. `_id` is the folderId: every read and write is
 * by `_id` alone (by-id.ts), and the document is separate from the folder's own, so a CORS
 * write never races with a change to the folder (FerretDB 1.24 updates are a read and a write
 * with no lock between them: a rename and a CORS write on one document could undo each other).
 */
export interface CorsRecord {
  _id: string;
  /** The folder's owner, for cleaning up a user's data; access is decided by the folder. */
  userId: string;
  CORSRules: CorsRule[];
  updatedAt: number;
}

// Optional arrays default to absent, not [], so a configuration reads back as it was written.
const optionalStrings = { type: [String], default: undefined };
const rule = new Schema<CorsRule>(
  {
    AllowedOrigins: { type: [String], required: true },
    AllowedMethods: { type: [String], required: true },
    AllowedHeaders: optionalStrings,
    ExposeHeaders: optionalStrings,
    MaxAgeSeconds: { type: Number },
    ID: { type: String },
  },
  { _id: false, id: false },
);

const schema = new Schema<CorsRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    CORSRules: { type: [rule], required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false },
);

export function createCorsStore(conn: Connection) {
  const Cors: Model<CorsRecord> = conn.model<CorsRecord>('FolderCors', schema, 'folder_cors');
  return {
    model: Cors,

    get: (folderId: string) => Cors.findById(folderId).lean<CorsRecord>().exec(),

    /** Writes the whole configuration, replacing any earlier one: the last write wins whole. */
    async put(record: CorsRecord): Promise<void> {
      try {
        await Cors.replaceOne({ _id: record._id }, record, { upsert: true }).exec();
      } catch (err) {
        // Two first writes at once may both try to insert; the loser replaces the winner's.
        if (!isDuplicateKey(err)) throw err;
        await Cors.replaceOne({ _id: record._id }, record, { upsert: true }).exec();
      }
    },

    /** True if there was a configuration to delete. */
    async delete(folderId: string): Promise<boolean> {
      return (await Cors.deleteOne({ _id: folderId }).exec()).deletedCount === 1;
    },
  };
}

export type CorsStore = ReturnType<typeof createCorsStore>;
