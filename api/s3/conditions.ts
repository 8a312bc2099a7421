// Conditional writes (S3's If-Match and If-None-Match on PutObject, CompleteMultipartUpload,
// DeleteObject and DeleteObjects' per-key ETag): the request says what the key's current object
// must (or must not) be. A write whose condition fails is 412 PreconditionFailed; If-Match on a
// key with no object is 404 NoSuchKey for a write, and nothing to do for a delete.
//
// Checked against the record before the write, not in the same step as it: two conditional
// writes of one key racing each other can both pass (S3 makes that atomic; here the last wins).
import type { ObjectRecord } from '../usecases/s3/objects.js';
import { getObject } from '../usecases/s3/objects.js';
import type { S3Context } from './context.js';
import { S3Error } from './errors.js';
import { toS3Error } from './failures.js';

/** Whether an If-Match / If-None-Match list names the ETag (`*` names any). */
export function etagListed(list: string, etag: string): boolean {
  return list.split(',').some((item) => {
    const t = item.trim().replace(/^W\//, '');
    return t === '*' || t === `"${etag}"` || t === etag;
  });
}

export const preconditionFailed = (condition: string) =>
  new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: condition });

/** The key's current object, or null when it has none (a missing bucket still throws). */
export async function currentObject(ctx: S3Context, bucket: string, key: string): Promise<ObjectRecord | null> {
  try {
    return await getObject(ctx.deps, ctx.caller, bucket, key);
  } catch (err) {
    if (toS3Error(err)?.code === 'NoSuchKey') return null;
    throw err;
  }
}

/** Throws when the request's If-Match or If-None-Match does not hold for the key's object. */
export async function checkWriteConditions(ctx: S3Context, bucket: string, key: string, kind: 'write' | 'delete'): Promise<void> {
  const header = (name: string) => {
    const value = ctx.req.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  };
  const ifMatch = header('if-match');
  const ifNoneMatch = kind === 'write' ? header('if-none-match') : undefined;
  if (ifMatch === undefined && ifNoneMatch === undefined) return;
  const existing = await currentObject(ctx, bucket, key);
  if (ifMatch !== undefined) {
    if (!existing) {
      if (kind === 'delete') return;
      throw new S3Error('NoSuchKey', 'The specified key does not exist.');
    }
    if (!etagListed(ifMatch, existing.etag)) throw preconditionFailed('If-Match');
  }
  if (ifNoneMatch !== undefined && existing && etagListed(ifNoneMatch, existing.etag)) throw preconditionFailed('If-None-Match');
}
