// S3 multipart uploads. Each part is added to Kubo with the profile as it arrives (its own
// UnixFS file), kept out of Kubo's garbage collector under the upload's MFS directory
// (infra/ipfs/kubo-mfs.ts), and reserved against the owner's storage. CompleteMultipartUpload
// checks the part list and hands the rest to the durable workflow `mpu:<uploadId>`
// (workflows/multipart.ts): assemble the object's DAG from the parts (infra/ipfs/unixfs-file.ts:
// the CID of the whole object added at once), record the object (whose hold takes over the
// parts' reservation exactly), then drop the parts. The upload's state in MongoDB is what
// makes a retried completion answer the same: `open` → `completing` (one conditional update:
// of two racing completions one starts the job) → `completed` with its result.
import crypto from 'node:crypto';
import { CHECKSUM_LABELS, type ChecksumName, type ChecksumType } from '../../infra/checksums.js';
import { S3_MAX_OBJECT_BYTES, S3_MAX_PARTS, S3_MAX_PUT_BYTES, S3_MIN_PART_BYTES } from '../../infra/constants.js';
import type { MultipartUploadRecord, PartRecord } from '../../infra/db/multipart.js';
import { partId } from '../../infra/db/multipart.js';
import type { EtagCondition, ObjectChecksums } from '../../infra/db/objects.js';
import { dropParts, keepPart } from '../../infra/ipfs/kubo-mfs.js';
import { parseCid } from '../../infra/ipfs/cid.js';
import { randomBase62 } from '../../infra/secrets.js';
import { multipartJob, type MultipartResult } from '../../infra/temporal/contracts/multipart.js';
import { assembleFile, type AssembledFile } from '../../infra/ipfs/unixfs-file.js';
import { giveBack, reserveStorage } from '../content.js';
import type { Caller, UseCaseDeps } from '../deps.js';
import { InvalidInput, NotFound, PreconditionFailed, TooLarge, Unavailable } from '../errors.js';
import { beginUpload } from '../uploads.js';
import { bucketTakes, noSuchBucket, ownBucket } from './buckets.js';
import { noSuchKey, objectKey, readBody, recordObject, removeObject, type ObjectBody, type ObjectDetails } from './objects.js';
import { algorithmOf, checkExpected, objectChecksums, partChecksumsOf, type ExpectedChecksums } from './checksums.js';
import { abortUpload, allParts, releaseParts } from './parts.js';

export type { MultipartUploadRecord, PartRecord, MultipartResult };
export type MultipartDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'kubo' | 'config'>;

export const noSuchUpload = () => new NotFound('upload', 'NO_SUCH_UPLOAD');

/** How long CompleteMultipartUpload waits for its job before asking the client to retry. */
const COMPLETE_WAIT_MS = 10 * 60_000;

/** The caller's open upload of this bucket and key. */
export async function ownUpload(deps: MultipartDeps, caller: Caller, bucketName: string, key: string, uploadId: string, states = ['open']) {
  const bucket = await ownBucket(deps, caller, bucketName);
  const upload = await deps.db.multipart.get(uploadId);
  if (
    !upload ||
    upload.userId !== caller.user._id ||
    upload.bucket !== bucket._id ||
    upload.key !== key ||
    !states.includes(upload.state)
  ) {
    throw noSuchUpload();
  }
  return upload;
}

export async function createUpload(
  deps: MultipartDeps,
  caller: Caller,
  bucketName: string,
  key: string,
  details: ObjectDetails & { checksumAlgorithm: ChecksumName | null; checksumType: ChecksumType | null },
): Promise<MultipartUploadRecord> {
  const bucket = await ownBucket(deps, caller, bucketName);
  const now = Date.now();
  const upload: MultipartUploadRecord = {
    _id: randomBase62(32),
    bucket: bucket._id,
    key: objectKey(key),
    userId: caller.user._id,
    contentType: details.contentType,
    meta: JSON.stringify(details.meta),
    headers: details.headers,
    checksumAlgorithm: details.checksumAlgorithm && CHECKSUM_LABELS[details.checksumAlgorithm],
    checksumType: details.checksumType,
    state: 'open',
    result: null,
    completedParts: null,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.multipart.create(upload);
  return upload;
}

/** Adds one part (1 to 10,000; up to 5 GiB), replacing an earlier part of that number. */
export async function uploadPart(
  deps: MultipartDeps,
  caller: Caller,
  target: { bucket: string; key: string; uploadId: string; partNumber: number },
  body: ObjectBody,
): Promise<PartRecord> {
  const { uploadId, partNumber } = target;
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > S3_MAX_PARTS) {
    throw new InvalidInput(`part numbers are 1 to ${S3_MAX_PARTS}`, 'INVALID_PART_NUMBER');
  }
  const upload = await ownUpload(deps, caller, target.bucket, target.key, uploadId);
  if ((body.declaredBytes ?? 0) > S3_MAX_PUT_BYTES) throw partTooLarge();
  const adding = await beginUpload(deps, caller, { declaredBytes: body.declaredBytes });
  const { added, digest } = await readBody(body, (stream) => adding.add(stream, { signal: body.signal }));
  if (added.bytes > S3_MAX_PUT_BYTES) throw partTooLarge();
  // Parts of an upload with a checksum algorithm carry it, as S3 requires (the object's is made of theirs).
  const wanted = algorithmOf(upload);
  if (wanted && !digest.checksums[wanted]) {
    const sent = Object.keys(digest.checksums)[0] ?? 'null';
    throw new InvalidInput(
      `Checksum Type mismatch occurred, expected checksum Type: ${wanted}, actual checksum Type: ${sent}`,
      'CHECKSUM_TYPE_MISMATCH',
    );
  }
  const cid = added.cid.toString();
  const parsed = parseCid(cid);
  const userId = caller.user._id;
  // Logged before the reservation: a process killed before the part is recorded is recounted.
  await deps.db.holdChanges.append(parsed.multihash, parsed.v1, { userId });
  await reserveStorage(deps.db, userId, caller.plan, parsed, added.bytes);
  const part: PartRecord = {
    _id: partId(uploadId, partNumber),
    uploadId,
    userId,
    partNumber,
    cid,
    size: added.bytes,
    dagSize: added.dagSize ?? added.bytes,
    etag: digest.md5.toString('hex'),
    checksums: digest.checksums,
    createdAt: Date.now(),
  };
  let replaced: PartRecord | null;
  try {
    await keepPart(deps.kubo, uploadId, partNumber, cid).catch(() => {
      throw new Unavailable('kubo');
    });
    replaced = await deps.db.multipart.putPart(part);
  } catch (err) {
    await giveBack(deps.db, userId, parsed, { used: added.bytes, files: 0 });
    throw err;
  }
  if (replaced) await giveBack(deps.db, userId, parseCid(replaced.cid), { used: replaced.size, files: 0 });
  // Completed or aborted while this part came in: the part is not the upload's.
  const now = await deps.db.multipart.get(uploadId);
  if (now?.state !== 'open') {
    const removed = await deps.db.multipart.deletePart(part._id);
    if (removed) await giveBack(deps.db, userId, parsed, { used: removed.size, files: 0 });
    if (!now || now.state === 'aborted') await dropParts(deps.kubo, uploadId);
    throw noSuchUpload();
  }
  return part;
}

const partTooLarge = () => new TooLarge('ENTITY_TOO_LARGE', `a part is at most ${S3_MAX_PUT_BYTES} bytes`);

/** A page of the upload's parts after `afterPart`; `truncated` when more follow. */
export async function listParts(
  deps: MultipartDeps,
  caller: Caller,
  target: { bucket: string; key: string; uploadId: string },
  afterPart: number,
  maxParts: number,
) {
  const upload = await ownUpload(deps, caller, target.bucket, target.key, target.uploadId);
  const rows = await deps.db.multipart.listParts(upload._id, afterPart, maxParts + 1);
  return { upload, parts: rows.slice(0, maxParts), truncated: rows.length > maxParts };
}

/** A page of the bucket's open uploads in (key, upload ID) order. */
export async function listUploads(
  deps: MultipartDeps,
  caller: Caller,
  bucketName: string,
  q: { prefix: string; afterKey?: string; afterId?: string; maxUploads: number },
) {
  const bucket = await ownBucket(deps, caller, bucketName);
  const rows = await deps.db.multipart.listOpen(bucket._id, {
    prefix: q.prefix || undefined,
    below: q.prefix ? `${q.prefix}\u{10FFFF}` : undefined,
    afterKey: q.afterKey,
    afterId: q.afterId,
    limit: q.maxUploads + 1,
  });
  return { uploads: rows.slice(0, q.maxUploads), truncated: rows.length > q.maxUploads };
}

/** Every part of the upload, in number order (at most 10,000), with the checksums the client
 * has of each (optional; each must be the part's). */
export interface ListedPart {
  partNumber: number;
  etag: string;
  checksums?: ObjectChecksums;
}

/**
 * Completes the upload with the listed parts (in ascending order, a number repeated in a row
 * naming its part by the last entry, each as uploaded, all but the last at least 5 MiB) and
 * answers the object's ETag and CID. A retry of a completed upload with the same parts answers
 * the same.
 */
export async function completeUpload(
  deps: MultipartDeps,
  caller: Caller,
  target: { bucket: string; key: string; uploadId: string },
  listed: ListedPart[],
  expected: ExpectedChecksums = { checksums: {} },
  /** If-Match / If-None-Match on the key: checked again when the job records the object. */
  condition?: EtagCondition,
): Promise<MultipartResult> {
  const upload = await ownUpload(deps, caller, target.bucket, target.key, target.uploadId, ['open', 'completing', 'completed']);
  // A number listed twice in a row names its part by the last entry, as ceph's RGW reads the
  // list (into a map by number): a client that sent a part again while the first send was still
  // going lists both answers (s3-tests' test_multipart_resend_first_finishes_last).
  listed = listed.filter((p, i) => listed[i + 1]?.partNumber !== p.partNumber);
  const numbers = listed.map((p) => p.partNumber);
  if (upload.state !== 'open') {
    if (JSON.stringify(upload.completedParts) !== JSON.stringify(numbers)) throw noSuchUpload();
    if (upload.state === 'completed' && upload.result) return upload.result;
    return runCompletion(deps, upload);
  }
  if (listed.length === 0) throw new InvalidInput('name at least one part', 'MALFORMED_PART_LIST');
  for (let i = 1; i < numbers.length; i++) {
    if (numbers[i]! <= numbers[i - 1]!)
      throw new InvalidInput('parts must be listed in ascending order of part number', 'INVALID_PART_ORDER');
  }
  const byNumber = new Map((await allParts(deps, upload._id)).map((p) => [p.partNumber, p]));
  let total = 0;
  listed.forEach((p, i) => {
    const part = byNumber.get(p.partNumber);
    const sameChecksums = Object.entries(p.checksums ?? {}).every(([name, value]) => part?.checksums?.[name as ChecksumName] === value);
    if (!part || part.etag !== p.etag.replace(/"/g, '').toLowerCase() || !sameChecksums) {
      throw new InvalidInput(`part ${p.partNumber} was not uploaded, or its ETag or checksum differs`, 'INVALID_PART');
    }
    if (i < listed.length - 1 && part.size < S3_MIN_PART_BYTES) {
      throw new InvalidInput(
        `part ${p.partNumber} is ${part.size} bytes; every part but the last needs at least ${S3_MIN_PART_BYTES}`,
        'ENTITY_TOO_SMALL',
      );
    }
    total += part.size;
  });
  if (total > S3_MAX_OBJECT_BYTES) throw new TooLarge('ENTITY_TOO_LARGE', `an object is at most ${S3_MAX_OBJECT_BYTES} bytes`);
  await checkExpected(
    upload,
    listed.map((p) => byNumber.get(p.partNumber)!),
    expected,
  );
  const claimed = await deps.db.multipart.transition(upload._id, ['open'], 'completing', {
    completedParts: numbers,
    condition: condition ?? null,
    conditionFailed: null,
  });
  // Another completion or an abort came first: answer as for a retry.
  if (!claimed) return completeUpload(deps, caller, target, listed);
  return runCompletion(deps, { ...upload, state: 'completing', completedParts: numbers });
}

/**
 * Starts the upload's job (or finds it running) and waits until the upload is completed. The
 * upload's state, not the job's result, is waited for: the job goes on to drop the parts once
 * the object is pinned, and the client need not wait for that.
 */
async function runCompletion(deps: MultipartDeps, upload: MultipartUploadRecord): Promise<MultipartResult> {
  await deps.jobs.start(multipartJob, { uploadId: upload._id, userId: upload.userId });
  const deadline = Date.now() + COMPLETE_WAIT_MS;
  for (let wait = 20; Date.now() < deadline; wait = Math.min(wait * 2, 500)) {
    const now = await deps.db.multipart.get(upload._id);
    if (now?.state === 'completed' && now.result) return now.result;
    if (now?.state === 'completed' && now.conditionFailed === 'NoSuchBucket') throw noSuchBucket();
    // The job found the key's object not as the condition asked: the upload is open again.
    if (now?.state === 'open' && now.conditionFailed)
      throw now.conditionFailed === 'NoSuchKey' ? noSuchKey() : new PreconditionFailed(now.conditionFailed);
    if (!now || now.state !== 'completing') throw noSuchUpload();
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  throw new Unavailable('the multipart completion');
}

/** Aborts the caller's upload: its parts are dropped and their bytes given back. */
export async function abortMultipart(
  deps: MultipartDeps,
  caller: Caller,
  target: { bucket: string; key: string; uploadId: string },
): Promise<void> {
  const upload = await ownUpload(deps, caller, target.bucket, target.key, target.uploadId, ['open', 'aborted']);
  if (!(await abortUpload(deps, upload))) throw noSuchUpload();
}

// ---- The steps of the completion job (activities/multipart.ts) ----

async function completing(deps: Pick<UseCaseDeps, 'db'>, uploadId: string) {
  const upload = await deps.db.multipart.get(uploadId);
  if (!upload || (upload.state !== 'open' && !upload.completedParts))
    throw new Error(`multipart upload ${uploadId} is not being completed`);
  const byNumber = new Map((await allParts(deps, uploadId)).map((p) => [p.partNumber, p]));
  // Open again (the completion's condition failed): no parts are being completed.
  const parts = (upload.completedParts ?? []).map((n) => byNumber.get(n));
  return { upload, parts };
}

/** Builds the object's DAG from the listed parts (null: the upload was completed already, or
 * is open again). */
export async function assembleUpload(deps: MultipartDeps, uploadId: string, signal?: AbortSignal): Promise<AssembledFile | null> {
  const { upload, parts } = await completing(deps, uploadId);
  if (upload.state !== 'completing') return null; // completed, or open again after a failed condition
  if (parts.some((p) => !p)) throw new Error(`multipart upload ${uploadId} lost a part`);
  return assembleFile(
    deps.kubo,
    deps.config.kubo.apiUrl,
    parts.map((p) => ({ cid: p!.cid, size: p!.size })),
    signal,
  );
}

/**
 * Records the assembled object under its key and marks the upload completed with its answer.
 * With a condition that the key's object does not meet (checked in the record's write), the
 * upload is open again, its parts and their reservations kept, and the answer is null. When the
 * bucket was deleted meanwhile (buckets.ts deleteBucket), the object is taken back and the upload
 * ends completed with no object (answered NoSuchBucket), its parts dropped; the answer is null.
 */
export async function commitUpload(deps: MultipartDeps, uploadId: string, assembled: AssembledFile): Promise<MultipartResult | null> {
  const { upload, parts: listed } = await completing(deps, uploadId);
  if (upload.state === 'completed' && upload.result) return upload.result;
  if (upload.state !== 'completing') return null; // reopened by an earlier run of this step
  const parts = listed as PartRecord[];
  const etag = `${crypto
    .createHash('md5')
    .update(Buffer.concat(parts.map((p) => Buffer.from(p.etag, 'hex'))))
    .digest('hex')}-${parts.length}`;
  const user = await deps.db.users.get(upload.userId);
  if (!user) throw new Error(`the owner of multipart upload ${uploadId} is gone`);
  const reserved = parts.reduce((sum, p) => sum + p.size, 0);
  const checksums = await objectChecksums(upload, parts);
  // A retried step whose first run recorded the object finds its own object there: the
  // condition was met then.
  const condition =
    upload.condition && (await deps.db.objects.get(upload.bucket, upload.key))?.uploadId !== uploadId ? upload.condition : undefined;
  const recorded = recordObject(
    deps,
    { user, plan: deps.config.plans.get(user.plan) },
    { bucket: upload.bucket, key: upload.key, cid: assembled.cid, size: assembled.size, dagSize: assembled.dagSize },
    {
      contentType: upload.contentType,
      meta: JSON.parse(upload.meta) as Record<string, string>,
      headers: upload.headers,
      etag,
      checksums,
      uploadId,
      parts: parts.length,
      partSizes: parts.map((p) => p.size),
      partChecksums: partChecksumsOf(upload, parts),
    },
    reserved,
    condition,
  );
  let record;
  try {
    record = await recorded;
  } catch (err) {
    const failed =
      err instanceof PreconditionFailed ? err.condition : err instanceof NotFound && err.reason === 'NO_SUCH_KEY' ? 'NoSuchKey' : null;
    if (!failed) throw err;
    await deps.db.multipart.transition(uploadId, ['completing'], 'open', {
      completedParts: null,
      condition: null,
      conditionFailed: failed,
    });
    return null;
  }
  if (!(await bucketTakes(deps, upload.bucket, upload.userId))) {
    // The object's hold took the listed parts' reservations; its removal gives them back, and
    // the parts go as a completed upload's do.
    await removeObject(deps, record, { ifMatch: [record.etag], modifiedAt: record.lastModified });
    await deps.db.multipart.transition(uploadId, ['completing'], 'completed', { conditionFailed: 'NoSuchBucket' });
    await releaseParts(deps, upload, upload.completedParts ?? []);
    return null;
  }
  const result: MultipartResult = { cid: assembled.cid, etag, size: assembled.size, checksums: { ...checksums } };
  await deps.db.multipart.transition(uploadId, ['completing'], 'completed', { result });
  return result;
}

/** Drops the completed upload's parts (their bytes stay: the object links them). */
export async function dropCompletedParts(deps: Pick<UseCaseDeps, 'db' | 'kubo'>, uploadId: string): Promise<void> {
  const upload = await deps.db.multipart.get(uploadId);
  if (upload?.state === 'completed') await releaseParts(deps, upload, upload.completedParts ?? []);
}

/** Aborts uploads untouched for `maxAgeMs` and forgets completed ones as old; how many. */
export async function cleanAbandonedUploads(deps: Pick<UseCaseDeps, 'db' | 'kubo'>, maxAgeMs: number): Promise<number> {
  const before = Date.now() - maxAgeMs;
  let cleaned = 0;
  for (
    let batch = await deps.db.multipart.stale(['open', 'aborted'], before, 100);
    batch.length > 0;
    batch = await deps.db.multipart.stale(['open', 'aborted'], before, 100)
  ) {
    for (const upload of batch) if (await abortUpload(deps, upload)) cleaned++;
  }
  for (
    let batch = await deps.db.multipart.stale(['completed'], before, 100);
    batch.length > 0;
    batch = await deps.db.multipart.stale(['completed'], before, 100)
  ) {
    for (const upload of batch) {
      await releaseParts(deps, upload, upload.completedParts ?? []);
      await deps.db.multipart.deleteUpload(upload._id);
      cleaned++;
    }
  }
  return cleaned;
}
