// S3 objects: a bucket's records of content by full key (infra/db/objects.ts), each a hold on
// its content like a file's. Bytes go in through the same upload path as POST /upload/new
// (core/uploads.ts: the profile's CIDs, the quota counted while streaming); reading is
// the surface's business (Kubo's gateway). No transport here: the S3 surface maps errors.
import { recordEvent } from '../webhook-events.js';
import type { Readable } from 'node:stream';
import { parseCid } from '../../infra/ipfs/cid.js';
import { S3_MAX_PUT_BYTES } from '../../infra/constants.js';
import type { Reserved } from '../../infra/db/usage.js';
import {
  objectId,
  UNMET,
  type EtagCondition,
  type DeleteCondition,
  type ObjectChecksums,
  type ObjectHeaders,
  type ObjectRecord,
} from '../../infra/db/objects.js';
import { giveBack, holdsChanged, MB, quotaEvents, reserveHolding } from '../content.js';
import type { Caller, UseCaseDeps } from '../deps.js';
import { InvalidInput, LimitReached, NotFound, PreconditionFailed, TooLarge } from '../errors.js';
import { beginUpload } from '../uploads.js';
import { bucketTakes, noSuchBucket, ownBucket } from './buckets.js';

export type { DeleteCondition, EtagCondition, ObjectRecord };
type ObjectDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'kubo' | 'config'>;

/** What describes an object beside its bytes. */
export interface ObjectDetails {
  contentType: string;
  meta: Record<string, string>;
  headers: ObjectHeaders;
}

/** A verified body: its bytes, and a promise of what they hashed to that settles once they
 * are all read (rejecting, with the stream destroyed before it ends, when a check failed). */
export interface ObjectBody {
  stream: Readable;
  result: Promise<{ bytes: number; md5: Buffer; checksums: ObjectChecksums }>;
  /** The length the client declared, when it did. */
  declaredBytes?: number;
  signal?: AbortSignal;
}

/** A key is 1 to 1,024 bytes of UTF-8 (S3's rule). */
export function objectKey(key: string): string {
  if (key.length === 0 || Buffer.byteLength(key) > 1024) throw new InvalidInput('an object key is 1 to 1024 bytes', 'INVALID_KEY');
  return key;
}

export const noSuchKey = () => new NotFound('key', 'NO_SUCH_KEY');

/** Whether an ETag list names the ETag (`*` names any). */
export const etagListed = (list: string[], etag: string) => list.some((item) => item === '*' || item === etag);

/**
 * Throws when `condition` does not hold for the key's object (`current`, null: none): If-Match
 * on a missing key is NoSuchKey for a write, and nothing to do for a delete (`false`).
 */
export function checkCondition(
  condition: EtagCondition & DeleteCondition,
  current: ObjectRecord | null,
  kind: 'write' | 'delete',
): boolean {
  const { ifMatch, size, modifiedAt } = condition;
  if (ifMatch || size !== undefined || modifiedAt !== undefined) {
    if (!current) {
      if (kind === 'delete') return false;
      throw noSuchKey();
    }
    if (ifMatch && !etagListed(ifMatch, current.etag)) throw new PreconditionFailed('If-Match');
    if (size !== undefined && current.size !== size) throw new PreconditionFailed('x-amz-if-match-size');
    if (modifiedAt !== undefined && Math.floor(current.lastModified / 1000) * 1000 !== modifiedAt)
      throw new PreconditionFailed('x-amz-if-match-last-modified-time');
  }
  if (condition.ifNoneMatch && current && etagListed(condition.ifNoneMatch, current.etag)) throw new PreconditionFailed('If-None-Match');
  return true;
}

/** Streams the body into Kubo and records it under the key, replacing what the key held. */
export async function putObject(
  deps: ObjectDeps,
  caller: Caller,
  bucketName: string,
  key: string,
  body: ObjectBody,
  details: ObjectDetails,
  condition?: EtagCondition,
): Promise<ObjectRecord> {
  const bucket = await ownBucket(deps, caller, bucketName);
  objectKey(key);
  if ((body.declaredBytes ?? 0) > S3_MAX_PUT_BYTES) throw tooLarge();
  const upload = await beginUpload(deps, caller, { declaredBytes: body.declaredBytes });
  const { added, digest } = await readBody(body, (stream) => upload.add(stream, { signal: body.signal, mimeType: details.contentType }));
  if (added.bytes > S3_MAX_PUT_BYTES) throw tooLarge();
  return recordObject(
    deps,
    caller,
    { bucket: bucket._id, key, cid: added.cid.toString(), size: added.bytes, dagSize: added.dagSize },
    {
      ...details,
      etag: digest.md5.toString('hex'),
      checksums: digest.checksums,
      uploadId: null,
      parts: null,
    },
    undefined,
    condition,
  );
}

const tooLarge = () => new TooLarge('ENTITY_TOO_LARGE', `a single PUT takes at most ${S3_MAX_PUT_BYTES} bytes; use a multipart upload`);

/**
 * Runs `consume` over the body's bytes and waits for both. A body that failed its checks is
 * the error to report even when the consumer failed first (it saw the stream break).
 */
export async function readBody<T>(body: ObjectBody, consume: (stream: Readable) => Promise<T>) {
  // A small body can be read, and fail its checks, before the consumer attaches (the surface
  // and the use-case await other things first): such a stream will emit nothing more.
  const { stream } = body;
  const consumed =
    stream.errored || stream.destroyed ? Promise.reject(stream.errored ?? new Error('the body was closed')) : consume(stream);
  // A consumer that failed (Kubo gone mid-part) reads no more: the body stops with its failure,
  // or the digest, which waits for the body's end, would wait for ever (measured by npm run
  // chaos: an UploadPart in flight when Kubo was killed went unanswered).
  consumed.catch((err: unknown) => stream.destroy(err instanceof Error ? err : new Error(String(err))));
  const [added, digest] = await Promise.allSettled([consumed, body.result]);
  if (digest.status === 'rejected') throw digest.reason;
  if (added.status === 'rejected') throw added.reason;
  return { added: added.value, digest: digest.value };
}

export interface StoredContent {
  bucket: string;
  key: string;
  cid: string;
  size: number;
  dagSize: number | null;
}

export type StoredDetails = ObjectDetails & Pick<ObjectRecord, 'etag' | 'checksums' | 'uploadId' | 'parts' | 'partSizes' | 'partChecksums'>;

/**
 * Records content as the object at the key and holds it; the key's previous object (if any)
 * releases its hold. What the object adds to the user's distinct storage is reserved first
 * (one conditional update: STORAGE_LIMIT when it does not fit), unless `reserved` says how
 * many bytes were reserved for it already (a multipart upload's parts): the holding update
 * then settles exactly that reservation (infra/db/usage.ts).
 */
export async function recordObject(
  deps: Pick<UseCaseDeps, 'db' | 'jobs'>,
  caller: Pick<Caller, 'user' | 'plan'>,
  content: StoredContent,
  details: StoredDetails,
  reserved?: number,
  /** Checked in the same write as the record (infra/db/objects.ts): PreconditionFailed or NoSuchKey. */
  condition?: EtagCondition,
): Promise<ObjectRecord> {
  const userId = caller.user._id;
  const cid = parseCid(content.cid);
  // Logged before the reservation and the record, with the counter it moves (activities/counts.ts).
  await deps.db.holdChanges.append(cid.multihash, cid.v1, { userId });
  // A multipart upload's parts reserved `used` only (multipart.ts).
  const held: Reserved & { usedAfter?: number } =
    reserved !== undefined
      ? { used: reserved, files: 0 }
      : await reserveHolding(deps.db, userId, caller.plan, cid, 'object', content.size).catch(async (err: unknown) => {
          if (err instanceof LimitReached) await quotaEvents(deps, userId, caller.plan, caller.plan.storageMB * MB, 0, true);
          throw err;
        });
  const record: ObjectRecord = {
    _id: objectId(content.bucket, content.key),
    bucket: content.bucket,
    key: content.key,
    userId,
    cid: cid.v1,
    multihash: cid.multihash,
    size: content.size,
    dagSize: content.dagSize,
    etag: details.etag,
    contentType: details.contentType,
    meta: JSON.stringify(details.meta),
    headers: details.headers,
    checksums: details.checksums,
    uploadId: details.uploadId,
    parts: details.parts,
    partSizes: details.partSizes ?? null,
    partChecksums: details.partChecksums ?? null,
    lastModified: Date.now(),
  };
  let previous: ObjectRecord | null;
  try {
    const written = await deps.db.objects.put(record, condition);
    if (written === UNMET) {
      // Why, from the key's object now: the same answer as the check before the body was read.
      checkCondition(condition!, await deps.db.objects.get(content.bucket, content.key), 'write');
      throw new PreconditionFailed(condition!.ifMatch ? 'If-Match' : 'If-None-Match');
    }
    previous = written;
  } catch (err) {
    // A multipart upload's parts keep their reservation until an object's hold takes it over.
    if (reserved === undefined) await giveBack(deps.db, userId, cid, held);
    throw err;
  }
  // The previous object's content is known only now: logged before its count moves.
  const replaced = previous && previous.multihash !== cid.multihash ? previous : null;
  if (replaced) await deps.db.holdChanges.append(replaced.multihash, replaced.cid, { userId });
  // A multipart completion retried after its write (activities/multipart.ts) counted it already.
  const retried = reserved !== undefined && previous?.uploadId === details.uploadId;
  if (!retried) {
    const stored = (await deps.db.usage.hold(userId, cid.multihash, 'object', content.size, held)).used;
    const removed = previous ? (await deps.db.usage.release(userId, previous.multihash, 'object')).used : 0;
    await deps.db.analytics.tryRecord(userId, record.lastModified, {
      uploads: 1,
      uploadBytes: content.size,
      mimeType: details.contentType,
      storedBytes: stored + removed,
    });
    // The account's storage after this write: after its reservation, settled by what it stored
    // and removed; a multipart upload's reservations came with its parts, so it is read.
    const usedAfter = held.usedAfter !== undefined ? held.usedAfter + stored - held.used + removed : await deps.db.usage.used(userId);
    await quotaEvents(deps, userId, caller.plan, usedAfter, stored + removed);
  }
  await holdsChanged(deps, cid, { kind: 'object', key: record._id, userId: record.userId }, { logged: true });
  if (replaced) await holdsChanged(deps, parseCid(replaced.cid), undefined, { logged: true });
  // A bucket deleted while the body came (buckets.ts deleteBucket) keeps no object: this one is
  // taken back, as a delete of exactly it. A multipart completion looks for itself (multipart.ts
  // commitUpload), as its parts go with the object.
  if (reserved === undefined && !(await bucketTakes(deps, content.bucket, userId))) {
    await removeObject(deps, record, { ifMatch: [record.etag], modifiedAt: record.lastModified });
    throw noSuchBucket();
  }
  const { bucket, key, etag, contentType, lastModified, uploadId } = record;
  await recordEvent(deps, userId, {
    type: 's3.object.created',
    subject: `s3:${bucket}/${key}`,
    data: { bucket, key, cid: record.cid, size: record.size, etag, contentType, lastModified },
    // A multipart completion may be recorded again by its retried activity: once per upload.
    ...(uploadId ? { id: `msg_s3_${uploadId}` } : {}),
  });
  return record;
}

/**
 * The caller's object. Read first, as most reads find theirs: an object of the caller's is in the
 * caller's bucket (no object outlives its bucket: buckets.ts deleteBucket), so the bucket is read
 * only to say why there is none (NoSuchBucket, AccessDenied, NoSuchKey).
 */
export async function getObject(deps: Pick<UseCaseDeps, 'db'>, caller: Caller, bucketName: string, key: string): Promise<ObjectRecord> {
  const mine = (object: ObjectRecord | null): object is ObjectRecord =>
    object !== null && object.userId === caller.user._id && object.bucket === bucketName;
  const object = await deps.db.objects.get(bucketName, key);
  if (mine(object)) return object;
  await ownBucket(deps, caller, bucketName);
  // Another account's object under the caller's bucket name would be one left by a bucket deleted
  // before that rule: not the caller's.
  throw noSuchKey();
}

/** Deletes the object (nothing to do when there is none, as S3 answers) and releases its hold. */
export async function deleteObject(
  deps: Pick<UseCaseDeps, 'db' | 'jobs'>,
  caller: Caller,
  bucketName: string,
  key: string,
  /** Only an object that meets it is deleted, in the same operation. */
  condition?: DeleteCondition,
): Promise<void> {
  const bucket = await ownBucket(deps, caller, bucketName);
  await deps.db.usage.ensure(caller.user._id); // before any record changes (infra/db/usage.ts)
  // Logged before the removal and the count it moves (activities/counts.ts), so one read first: a
  // process killed in between leaves a change naming it. An object put in between is logged by its put.
  const current = await deps.db.objects.get(bucket._id, key);
  if (!current || (condition && !checkCondition(condition, current, 'delete'))) return;
  if (!(await removeObject(deps, current, condition)) && condition) {
    // Replaced since it was read: the condition is asked of the object there now.
    checkCondition(condition, await deps.db.objects.get(bucket._id, key), 'delete');
  }
}

/** Deletes the key's object if it is (still) `current`'s key and meets the condition, and releases
 * its hold; what was deleted, or null. The caller has called `usage.ensure`. */
export async function removeObject(
  deps: Pick<UseCaseDeps, 'db' | 'jobs'>,
  current: ObjectRecord,
  condition?: DeleteCondition,
): Promise<ObjectRecord | null> {
  await deps.db.holdChanges.append(current.multihash, current.cid, { userId: current.userId });
  const removed = await deps.db.objects.delete(current.bucket, current.key, condition);
  if (!removed) return null;
  if (removed.multihash !== current.multihash) await deps.db.holdChanges.append(removed.multihash, removed.cid, { userId: removed.userId });
  const released = await deps.db.usage.release(removed.userId, removed.multihash, 'object');
  await deps.db.analytics.tryRecord(removed.userId, Date.now(), { deletes: 1, storedBytes: released.used });
  await holdsChanged(deps, parseCid(removed.cid), undefined, { logged: true });
  return removed;
}

/**
 * Copies an object without copying a byte: the new key holds the same CID. `details` replaces
 * the source's metadata (S3's REPLACE directive), or the source's is kept.
 */
export async function copyObject(
  deps: Pick<UseCaseDeps, 'db' | 'jobs'>,
  caller: Caller,
  from: { bucket: string; key: string },
  to: { bucket: string; key: string },
  details?: ObjectDetails,
  /** Throws when the copy must not happen after all (a surface's conditions on the source). */
  checkSource: (source: ObjectRecord) => void = () => undefined,
  /** What the target key's object must (not) be, checked in the write. */
  condition?: EtagCondition,
): Promise<ObjectRecord> {
  const source = await getObject(deps, caller, from.bucket, from.key);
  checkSource(source);
  const target = await ownBucket(deps, caller, to.bucket);
  objectKey(to.key);
  const kept: ObjectDetails = details ?? {
    contentType: source.contentType,
    meta: JSON.parse(source.meta) as Record<string, string>,
    headers: source.headers,
  };
  return recordObject(
    deps,
    caller,
    { bucket: target._id, key: to.key, cid: source.cid, size: source.size, dagSize: source.dagSize },
    {
      ...kept,
      etag: source.etag,
      checksums: source.checksums,
      uploadId: null,
      parts: source.parts,
      partSizes: source.partSizes,
      partChecksums: source.partChecksums,
    },
    undefined,
    condition,
  );
}
