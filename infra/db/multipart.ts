// S3 multipart uploads and their parts. A part's bytes are in Kubo from the moment it is
// answered (kept out of the garbage collector under the upload's own MFS directory,
// core/s3/multipart.ts); its record says where and what the client was told (its ETag).
// Each part's bytes are reserved against the owner's storage until the upload completes (the
// object's hold takes over) or is aborted (given back).
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { afterAscending } from './pages.js';
import { BYTES } from './bytes.js';
import { isDuplicateKey } from './errors.js';
import type { ChecksumType } from '../checksums.js';
import type { EtagCondition, ObjectChecksums, ObjectHeaders } from './objects.js';

export type UploadState = 'open' | 'completing' | 'completed' | 'aborted';

export interface UploadResult {
  cid: string;
  etag: string;
  size: number;
  checksums: ObjectChecksums;
}

export interface MultipartUploadRecord {
  /** The upload ID given to the client. */
  _id: string;
  bucket: string;
  key: string;
  userId: string;
  contentType: string;
  meta: string;
  headers: ObjectHeaders;
  /** The checksum the client asked parts to carry (CreateMultipartUpload's x-amz-checksum-algorithm,
   * as S3 names it: CRC32, SHA256, …), and how the object's is made of theirs (x-amz-checksum-type;
   * null with an algorithm: an upload from before types, COMPOSITE). */
  checksumAlgorithm: string | null;
  checksumType?: ChecksumType | null;
  state: UploadState;
  /** Once completed: what CompleteMultipartUpload answered (a retry answers it again). */
  result: UploadResult | null;
  /** The parts the completion used, in order, by number (a retry must name the same). */
  completedParts: number[] | null;
  /** The completion's If-Match / If-None-Match, checked when the job records the object. */
  condition?: EtagCondition | null;
  /** Why the last completion did not happen: its condition did not hold (the upload is open
   * again): `If-Match`, `If-None-Match`, or `NoSuchKey` (If-Match on a key with no object). */
  conditionFailed?: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface PartRecord {
  /** `<uploadId>/<part number, 5 digits>`: the parts of an upload in order by `_id`. */
  _id: string;
  uploadId: string;
  userId: string;
  partNumber: number;
  cid: string;
  size: number;
  dagSize: number;
  /** MD5 hex, without quotes. */
  etag: string;
  checksums: ObjectChecksums;
  createdAt: number;
}

const uploadSchema = new Schema<MultipartUploadRecord>(
  {
    _id: { type: String, required: true },
    bucket: { type: String, required: true },
    key: { type: String, required: true },
    userId: { type: String, required: true },
    contentType: { type: String, required: true },
    meta: { type: String, default: '{}' },
    headers: { type: Schema.Types.Mixed, default: {} },
    checksumAlgorithm: { type: String, default: null },
    checksumType: { type: String, default: null },
    state: { type: String, required: true },
    result: { type: Schema.Types.Mixed, default: null },
    completedParts: { type: [Number], default: null },
    condition: { type: Schema.Types.Mixed, default: null },
    conditionFailed: { type: String, default: null },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
// ListMultipartUploads of a bucket, by key then upload ID; the cleanup, by state and age.
uploadSchema.index({ bucket: 1, key: 1, _id: 1 });
uploadSchema.index({ state: 1, updatedAt: 1 });

const partSchema = new Schema<PartRecord>(
  {
    _id: { type: String, required: true },
    uploadId: { type: String, required: true },
    userId: { type: String, required: true },
    partNumber: { type: Number, required: true },
    cid: { type: String, required: true },
    size: { type: BYTES, required: true },
    dagSize: { type: BYTES, required: true },
    etag: { type: String, required: true },
    checksums: { type: Schema.Types.Mixed, default: {} },
    createdAt: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
partSchema.index({ uploadId: 1, partNumber: 1 });

export const partId = (uploadId: string, partNumber: number) => `${uploadId}/${String(partNumber).padStart(5, '0')}`;

export function createMultipartStore(conn: Connection) {
  const Uploads: Model<MultipartUploadRecord> = conn.model<MultipartUploadRecord>('MultipartUpload', uploadSchema, 'multipart_uploads');
  const Parts: Model<PartRecord> = conn.model<PartRecord>('MultipartPart', partSchema, 'multipart_parts');
  return {
    uploads: Uploads,
    parts: Parts,

    create: (upload: MultipartUploadRecord) => Uploads.create(upload),

    get: (uploadId: string) => Uploads.findById(uploadId).lean<MultipartUploadRecord>().exec(),

    /** Moves the upload from one of `from` to `to` (with `set`); the upload as it was, or null
     * when it was in none of them. One conditional update: of two racing, one wins. */
    transition: (uploadId: string, from: UploadState[], to: UploadState, set: Partial<MultipartUploadRecord> = {}) =>
      Uploads.findOneAndUpdate(
        { _id: uploadId, state: { $in: from } },
        { $set: { ...set, state: to, updatedAt: Date.now() } },
        { returnDocument: 'before' },
      )
        .lean<MultipartUploadRecord>()
        .exec(),

    deleteUpload: (uploadId: string) => Uploads.deleteOne({ _id: uploadId }).exec(),

    /** Open uploads of the bucket in (key, uploadId) order after a point. */
    listOpen(bucket: string, r: { afterKey?: string; afterId?: string; prefix?: string; below?: string; limit: number }) {
      const and: Record<string, unknown>[] = [{ bucket }, { state: 'open' }];
      if (r.prefix) and.push({ key: { $gte: r.prefix } });
      if (r.below !== undefined) and.push({ key: { $lt: r.below } });
      if (r.afterKey !== undefined) {
        and.push({ key: { $gte: r.afterKey } });
        and.push(r.afterId ? { $or: [{ key: { $gt: r.afterKey } }, { _id: { $gt: r.afterId } }] } : { key: { $gt: r.afterKey } });
      }
      return Uploads.find({ $and: and }).sort({ key: 1, _id: 1 }).limit(r.limit).lean<MultipartUploadRecord[]>().exec();
    },

    /** Every open upload of the bucket, a batch at a time (a bucket delete aborts them). */
    openInBucket: (bucket: string, limit: number) =>
      Uploads.find({ bucket, state: 'open' }).limit(limit).lean<MultipartUploadRecord[]>().exec(),

    /** Open uploads, least recently touched first, a page after `after` (the audit's walk). */
    openPage: (limit: number, last?: MultipartUploadRecord) =>
      Uploads.find({ state: 'open', ...(last ? afterAscending('updatedAt', { at: last.updatedAt, id: last._id }) : {}) })
        .sort({ updatedAt: 1, _id: 1 })
        .limit(limit)
        .lean<MultipartUploadRecord[]>()
        .exec(),

    /** Uploads in a state not touched since `before`, oldest first (the cleanup). */
    stale: (states: UploadState[], before: number, limit: number) =>
      Uploads.find({ state: { $in: states }, updatedAt: { $lt: before } })
        .sort({ updatedAt: 1 })
        .limit(limit)
        .lean<MultipartUploadRecord[]>()
        .exec(),

    /** Writes the part, replacing one of the same number; the replaced part, or null. */
    async putPart(part: PartRecord): Promise<PartRecord | null> {
      const { _id, ...fields } = part;
      const write = () =>
        Parts.findOneAndUpdate({ _id }, { $set: fields }, { upsert: true, returnDocument: 'before' }).lean<PartRecord>().exec();
      try {
        return await write();
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        return await write();
      }
    },

    /** Parts in number order after `afterPart`. */
    listParts: (uploadId: string, afterPart: number, limit: number) =>
      Parts.find({ uploadId, partNumber: { $gt: afterPart } })
        .sort({ partNumber: 1 })
        .limit(limit)
        .lean<PartRecord[]>()
        .exec(),

    /** Deletes one part; what was deleted, or null (whoever deletes it gives its bytes back). */
    deletePart: (id: string) => Parts.findOneAndDelete({ _id: id }).lean<PartRecord>().exec(),
  };
}

export type MultipartStore = ReturnType<typeof createMultipartStore>;
