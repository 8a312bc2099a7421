// S3 buckets (docs/api/contract.md, "S3 buckets"): a globally unique, DNS-compatible name owned by one user and
// backed by a top-level folder of that user with the same name (its CORS document is the
// bucket's; its snapshots are the bucket's directory CIDs, served by the gateway under
// `/folders/<bucket>`). Objects are not the folder's files: a flat key space (objects.ts).
import type { BucketRecord } from '../../infra/db/buckets.js';
import { RECORD_COMPLETION_MS, S3_BUCKET_DELETE_MARK_MS, S3_BUCKETS_MAX } from '../../infra/constants.js';
import type { Caller, UseCaseDeps } from '../deps.js';
import { Conflict, Forbidden, InvalidInput, LimitReached, NotFound, StupaError } from '../errors.js';
import { createFolder, deleteFolder } from '../folders.js';
import { abortUpload } from './parts.js';

type BucketDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'kubo' | 'config'>;
export type { BucketRecord };

/**
 * S3's rules for new buckets: 3 to 63 of lower-case letters, digits, `-` and `.`, starting and
 * ending with a letter or digit, no `..` and no dot next to a dash, not an IPv4 address, none
 * of AWS's reserved prefixes or suffixes. Names are hosts in virtual-host style, hence
 * DNS-compatible.
 */
export function bucketName(name: string): string {
  const valid =
    /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) &&
    !name.includes('..') &&
    // S3 refuses a dot next to a dash too (`a.-b`, `a-.b`): not a DNS label's edge.
    !/\.-|-\./.test(name) &&
    !/^\d+\.\d+\.\d+\.\d+$/.test(name) &&
    !/^(xn--|sthree-|amzn-s3-demo-)/.test(name) &&
    !/(-s3alias|--ol-s3|\.mrap|--x-s3)$/.test(name);
  if (!valid)
    throw new InvalidInput(`${JSON.stringify(name)} is not a valid bucket name (3-63 of a-z, 0-9, "-" and ".")`, 'INVALID_BUCKET_NAME');
  return name;
}

export const noSuchBucket = () => new NotFound('bucket', 'NO_SUCH_BUCKET');

/** The caller's bucket: NO_SUCH_BUCKET when nobody has it, ACCESS_DENIED when another user does (as S3 answers). */
export async function ownBucket(deps: Pick<UseCaseDeps, 'db'>, caller: Caller, name: string): Promise<BucketRecord> {
  const bucket = await deps.db.buckets.get(name);
  if (!bucket) throw noSuchBucket();
  if (bucket.userId !== caller.user._id) throw new Forbidden('ACCESS_DENIED', 'the bucket belongs to another account');
  return bucket;
}

/**
 * After an object's write: whether its bucket is still there and the writer's. While the bucket
 * is marked by a DeleteBucket that has yet to decide (two operations apart), waits for the
 * decision; a mark that stays past RECORD_COMPLETION_MS (S3_BUCKET_DELETE_MARK_MS at most) is a
 * delete that died, and the bucket stays.
 */
export async function bucketTakes(deps: Pick<UseCaseDeps, 'db'>, name: string, userId: string): Promise<boolean> {
  const until = Date.now() + RECORD_COMPLETION_MS;
  for (let wait = 10; ; wait = Math.min(wait * 2, 500)) {
    const bucket = await deps.db.buckets.get(name);
    if (!bucket || bucket.userId !== userId) return false;
    const marked = bucket.deletingSince !== undefined && Date.now() - bucket.deletingSince < S3_BUCKET_DELETE_MARK_MS;
    if (!marked || Date.now() + wait > until) return true;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

export async function createBucket(deps: BucketDeps, caller: Caller, name: string): Promise<BucketRecord> {
  const userId = caller.user._id;
  const existing = await deps.db.buckets.get(bucketName(name));
  if (existing) throw taken(existing, userId);
  if ((await deps.db.buckets.countForUser(userId)) >= S3_BUCKETS_MAX) {
    throw new LimitReached('TOO_MANY_BUCKETS', `an account may have at most ${S3_BUCKETS_MAX} buckets`);
  }
  // The folder first, so a bucket never exists without one: the user's top-level folder of
  // that name, made now or one they had (not backing another bucket: names are unique).
  let folderId: string;
  try {
    folderId = (await createFolder(deps, userId, { name }))._id;
  } catch (err) {
    if (!(err instanceof StupaError && err.reason === 'FOLDER_EXISTS')) throw err;
    const folder = await deps.db.folders.topLevelByName(userId, name);
    if (!folder) throw err;
    folderId = folder._id;
  }
  const bucket: BucketRecord = { _id: name, userId, folderId, createdAt: Date.now() };
  if (!(await deps.db.buckets.insert(bucket))) {
    // Someone created it in between; the winner's record says whose it is.
    const winner = await deps.db.buckets.get(name);
    throw winner ? taken(winner, userId) : new Conflict('BUCKET_TAKEN', 'the bucket name is taken');
  }
  return bucket;
}

function taken(bucket: BucketRecord, userId: string): Conflict {
  return bucket.userId === userId
    ? new Conflict('BUCKET_OWNED', 'you own this bucket already')
    : new Conflict('BUCKET_TAKEN', 'the bucket name is taken; bucket names are shared by all accounts');
}

export const listBuckets = (deps: Pick<UseCaseDeps, 'db'>, caller: Caller) => deps.db.buckets.listForUser(caller.user._id);

/**
 * Deletes an empty bucket (BUCKET_NOT_EMPTY otherwise). Its unfinished multipart uploads are
 * aborted, as S3 does; its folder goes too when nothing else is in it (files added over REST,
 * subfolders or snapshots keep it).
 */
export async function deleteBucket(deps: BucketDeps, caller: Caller, name: string): Promise<void> {
  const bucket = await ownBucket(deps, caller, name);
  const notEmpty = () => new Conflict('BUCKET_NOT_EMPTY', 'the bucket is not empty');
  if (await deps.db.objects.any(bucket._id)) throw notEmpty();
  for (
    let batch = await deps.db.multipart.openInBucket(bucket._id, 100);
    batch.length > 0;
    batch = await deps.db.multipart.openInBucket(bucket._id, 100)
  ) {
    for (const upload of batch) await abortUpload(deps, upload);
  }
  // Marked, checked empty again, deleted: an object written after that check finds the mark, or
  // no bucket, when it looks after its write (`bucketTakes`), and takes itself back; so no object
  // outlives its bucket, where the name's next owner would find it. One written before the check
  // is seen by it.
  const mark = Date.now();
  if (!(await deps.db.buckets.markDeleting(bucket._id, bucket.userId, mark))) return;
  if (await deps.db.objects.any(bucket._id)) {
    await deps.db.buckets.unmarkDeleting(bucket._id, mark);
    throw notEmpty();
  }
  if (!(await deps.db.buckets.delete(bucket._id, bucket.userId))) return;
  const snapshots = await deps.db.snapshots.list(bucket.folderId, { limit: 1 });
  if (snapshots.length > 0) return;
  await deleteFolder(deps, bucket.userId, bucket.folderId, false).catch((err: unknown) => {
    if (!(err instanceof StupaError)) throw err;
  });
}
