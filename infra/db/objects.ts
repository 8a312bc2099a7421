// S3 objects: the records of a bucket's content, keyed by the full key. A flat key space, as S3
// has (`a/b` and `a/b/c` both exist; `a/` may hold bytes), so objects are not folder entries:
// they are their own kind of holder (holds.ts) under the bucket. Each holds its content for
// as long as it exists; many keys may hold the same content.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import type { ChecksumName } from '../checksums.js';
import { batchedById } from './batch.js';
import { isDuplicateKey } from './errors.js';
import { existenceHolder } from './holds.js';

/** What an object answers with beside its bytes (S3 stores them and gives them back). */
export interface ObjectHeaders {
  cacheControl?: string;
  contentDisposition?: string;
  contentEncoding?: string;
  contentLanguage?: string;
  expires?: string;
}

/** Checksums of the object, base64, as S3 returns them: a composite one (S3's checksum type
 * COMPOSITE, of a multipart object) ends in `-<parts>`, a full-object one does not. */
export type ObjectChecksums = Partial<Record<ChecksumName, string>>;

export interface ObjectRecord {
  /** `<bucket>/<key>` (bucket names have no `/`): one object per key. */
  _id: string;
  bucket: string;
  key: string;
  userId: string;
  cid: string;
  multihash: string;
  size: number;
  /** The cumulative size of the content's blocks. */
  dagSize: number | null;
  /** Without quotes: the MD5 in hex, or for multipart `md5(part MD5s)-<parts>`. */
  etag: string;
  contentType: string;
  /** `x-amz-meta-*` as JSON (names lower-cased, without the prefix): JSON because a name may
   * hold characters a MongoDB field name cannot (`.`, `$`). */
  meta: string;
  headers: ObjectHeaders;
  checksums: ObjectChecksums;
  /** The multipart upload that made it (none for a PutObject). */
  uploadId: string | null;
  parts: number | null;
  /** Each part's bytes, in order, for GET ?partNumber=N (null for a PutObject, and for
   * multipart objects recorded before part sizes were kept). */
  partSizes?: number[] | null;
  /** Each part's checksum of the upload's algorithm (base64), in order, for GET ?partNumber=N and
   * GetObjectAttributes (null without an algorithm, and for objects recorded before they were kept). */
  partChecksums?: string[] | null;
  lastModified: number;
}

const schema = new Schema<ObjectRecord>(
  {
    _id: { type: String, required: true },
    bucket: { type: String, required: true },
    key: { type: String, required: true },
    userId: { type: String, required: true },
    cid: { type: String, required: true },
    multihash: { type: String, required: true },
    size: { type: Number, required: true },
    dagSize: { type: Number, default: null },
    etag: { type: String, required: true },
    contentType: { type: String, required: true },
    meta: { type: String, default: '{}' },
    headers: { type: Schema.Types.Mixed, default: {} },
    checksums: { type: Schema.Types.Mixed, default: {} },
    uploadId: { type: String, default: null },
    parts: { type: Number, default: null },
    partSizes: { type: [Number], default: null },
    partChecksums: { type: [String], default: null },
    lastModified: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
// Listing a bucket in key order from a point (FerretDB pushes the range down on this index).
schema.index({ bucket: 1, key: 1 });
schema.index({ multihash: 1 });
// A usage rebuild and the audit read one user's objects in content order, a page at a time.
schema.index({ userId: 1, multihash: 1 });

export const objectId = (bucket: string, key: string) => `${bucket}/${key}`;

/** What a write requires of the key's current object: its ETag among `ifMatch`, or not among
 * `ifNoneMatch` (S3's If-Match and If-None-Match). ETags unquoted; `*` names any object. */
export interface EtagCondition {
  ifMatch?: string[];
  ifNoneMatch?: string[];
}

/** What a delete requires of the key's object: besides If-Match, S3's x-amz-if-match-size and
 * x-amz-if-match-last-modified-time (`modifiedAt`: the second it names, in ms). */
export interface DeleteCondition {
  ifMatch?: string[];
  size?: number;
  modifiedAt?: number;
}

/** The answer of a conditional write whose condition did not hold. */
export const UNMET = 'unmet' as const;

function conditionFilter(c: EtagCondition): { etag?: Record<string, string[]>; mustExist: boolean; mustNotExist: boolean } {
  const etag: Record<string, string[]> = {};
  if (c.ifMatch && !c.ifMatch.includes('*')) etag.$in = c.ifMatch;
  if (c.ifNoneMatch && !c.ifNoneMatch.includes('*')) etag.$nin = c.ifNoneMatch;
  return {
    etag: Object.keys(etag).length > 0 ? etag : undefined,
    mustExist: c.ifMatch !== undefined,
    mustNotExist: c.ifNoneMatch?.includes('*') ?? false,
  };
}

/** The first string (bytewise UTF-8, as MongoDB orders) after every string starting with `prefix`. */
export const afterPrefix = (prefix: string) => `${prefix}\u{10FFFF}`;

export interface ObjectRange {
  /** Keys after this one. */
  after?: string;
  /** Keys from this one on. */
  from?: string;
  /** Keys before this one. */
  below?: string;
  limit: number;
}

export function createObjectStore(conn: Connection) {
  const Objects: Model<ObjectRecord> = conn.model<ObjectRecord>('S3Object', schema, 'objects');
  // GetObject and HeadObject read the record every time (a key is overwritten at any moment);
  // reads that arrive together share one query (batch.ts).
  const byId = batchedById(Objects);
  return {
    model: Objects,
    holder: existenceHolder('object', Objects, 'lastModified'),

    get: (bucket: string, key: string) => byId(objectId(bucket, key)),

    /**
     * Writes the object, replacing the key's previous one, which it returns (null: new key).
     * With a condition, the check and the write are one operation: the condition is part of
     * the filter, so of two conditional writes racing on one key only one can see the state it
     * names. `UNMET` when the key's object (or its absence) does not satisfy it.
     */
    async put(object: ObjectRecord, condition: EtagCondition = {}): Promise<ObjectRecord | null | typeof UNMET> {
      const { _id, ...fields } = object;
      const { etag, mustExist, mustNotExist } = conditionFilter(condition);
      if (mustExist && mustNotExist) return UNMET;
      if (mustNotExist) {
        try {
          await Objects.collection.insertOne({ _id, ...fields } as never);
          return null;
        } catch (err) {
          if (isDuplicateKey(err)) return UNMET;
          throw err;
        }
      }
      const filter = { _id, ...(etag ? { etag } : {}) };
      const write = () =>
        Objects.findOneAndUpdate(filter, { $set: fields }, { upsert: !mustExist, returnDocument: 'before' }).lean<ObjectRecord>().exec();
      try {
        const previous = await write();
        return mustExist && !previous ? UNMET : previous;
      } catch (err) {
        // Two first writes of one key: the other inserted it, so this one replaces it (files.ts).
        // With If-None-Match, the upsert's insert also collides with an object the list names.
        if (!isDuplicateKey(err)) throw err;
        try {
          return await write();
        } catch (again) {
          if (etag && isDuplicateKey(again)) return UNMET;
          throw again;
        }
      }
    },

    /** Deletes the object (with a condition, only an object that meets it, in the same
     * operation); returns what was deleted (null: nothing was), so that whoever deleted it, and
     * only they, release its hold. */
    delete(bucket: string, key: string, c: DeleteCondition = {}) {
      const filter: Record<string, unknown> = { _id: objectId(bucket, key) };
      if (c.ifMatch && !c.ifMatch.includes('*')) filter.etag = { $in: c.ifMatch };
      if (c.size !== undefined) filter.size = c.size;
      // Last-Modified is said in whole seconds; the record keeps milliseconds.
      if (c.modifiedAt !== undefined) filter.lastModified = { $gte: c.modifiedAt, $lt: c.modifiedAt + 1000 };
      return Objects.findOneAndDelete(filter).lean<ObjectRecord>().exec();
    },

    /** Keys of the bucket in order, within a range: one index range, `limit` documents at most. */
    range(bucket: string, r: ObjectRange): Promise<ObjectRecord[]> {
      const key: Record<string, string> = {};
      if (r.after !== undefined) key.$gt = r.after;
      if (r.from !== undefined) key.$gte = r.from;
      if (r.below !== undefined) key.$lt = r.below;
      const filter = Object.keys(key).length ? { bucket, key } : { bucket };
      return Objects.find(filter).sort({ key: 1 }).limit(r.limit).lean<ObjectRecord[]>().exec();
    },

    /** Every object of the bucket, in key order, with what a snapshot links (a snapshot lists them all). */
    inBucket: (bucket: string) =>
      Objects.find({ bucket }, { key: 1, cid: 1, size: 1, dagSize: 1 })
        .sort({ key: 1 })
        .lean<Pick<ObjectRecord, 'key' | 'cid' | 'size' | 'dagSize'>[]>()
        .exec(),

    /** Whether the bucket holds any object (one index lookup). */
    async any(bucket: string): Promise<boolean> {
      return (await Objects.exists({ bucket })) !== null;
    },
  };
}

export type ObjectStore = ReturnType<typeof createObjectStore>;
