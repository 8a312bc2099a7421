// S3 buckets: a globally unique name owned by one user and backed by one of that user's
// folders (docs/api/contract.md, "S3 buckets"). The name is the `_id`, so "globally unique" is the unique `_id`.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { batchedById } from './batch.js';
import { count } from './count.js';
import { isDuplicateKey } from './errors.js';

export interface BucketRecord {
  /** The bucket's name. */
  _id: string;
  userId: string;
  /** The top-level folder that backs it (its snapshots are the bucket's directory CIDs). */
  folderId: string;
  createdAt: number;
  /** Set by DeleteBucket between its last emptiness check and the delete (core/s3/buckets.ts). */
  deletingSince?: number;
}

const schema = new Schema<BucketRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    folderId: { type: String, required: true },
    createdAt: { type: Number, required: true },
    deletingSince: { type: Number },
  },
  { versionKey: false },
);
schema.index({ userId: 1, _id: 1 });

export function createBucketStore(conn: Connection) {
  const Buckets: Model<BucketRecord> = conn.model<BucketRecord>('Bucket', schema, 'buckets');
  return {
    model: Buckets,

    /** False when the name is taken (by anyone). */
    async insert(bucket: BucketRecord): Promise<boolean> {
      try {
        await Buckets.create(bucket);
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    /** Read for every S3 request to the bucket, never remembered (a deleted name may be another
     * account's next); requests that arrive together share the read (batch.ts). */
    get: batchedById(Buckets),

    /** The user's buckets by name (at most BUCKETS_MAX). */
    listForUser: (userId: string) => Buckets.find({ userId }).sort({ _id: 1 }).lean<BucketRecord[]>().exec(),

    countForUser: (userId: string) => count(Buckets, { userId }),

    /** The bucket backed by this folder, if any (a folder's REST delete must not orphan one). */
    byFolder: (userId: string, folderId: string) => Buckets.findOne({ userId, folderId }).lean<BucketRecord>().exec(),

    /** Marks the user's bucket as being deleted (false: it is not there); `unmarkDeleting` takes
     * back that mark only. */
    async markDeleting(name: string, userId: string, at: number): Promise<boolean> {
      return (await Buckets.updateOne({ _id: name, userId }, { $set: { deletingSince: at } }).exec()).matchedCount === 1;
    },

    async unmarkDeleting(name: string, at: number): Promise<void> {
      await Buckets.updateOne({ _id: name, deletingSince: at }, { $unset: { deletingSince: 1 } }).exec();
    },

    async delete(name: string, userId: string): Promise<boolean> {
      return (await Buckets.deleteOne({ _id: name, userId }).exec()).deletedCount === 1;
    },
  };
}

export type BucketStore = ReturnType<typeof createBucketStore>;
