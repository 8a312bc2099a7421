// Conditional writes (S3's If-Match and If-None-Match on PutObject, CopyObject,
// CompleteMultipartUpload, DeleteObject and DeleteObjects' per-key ETag): the request says what
// the key's current object must (or must not) be. A write whose condition fails is 412
// PreconditionFailed; If-Match on a key with no object is 404 NoSuchKey for a write, and nothing
// to do for a delete.
//
// Each write checks the condition in the record's write itself (its filter, infra/db/objects.ts),
// so of two conditional writes racing on one key only one wins; the surface also checks it
// before reading a body, to refuse early. CompleteMultipartUpload's is kept on the upload and
// checked when the worker's job records the object (core/s3/multipart.ts): when it fails
// there, the upload is open again with its parts, and the waiting request answers 412.
import { checkCondition, getObject, type DeleteCondition, type EtagCondition, type ObjectRecord } from '../../core/s3/objects.js';
import type { S3Context } from './context.js';
import { S3Error } from './errors.js';
import { toS3Error } from './failures.js';

/** An If-Match / If-None-Match header as a list of unquoted ETags (`*` names any). */
export function etagList(header: string): string[] {
  return header.split(',').map((item) =>
    item
      .trim()
      .replace(/^W\//, '')
      .replace(/^"(.*)"$/, '$1'),
  );
}

export const preconditionFailed = (condition: string) =>
  new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: condition });

/** The key's current object, or null when it has none (a missing bucket still throws). */
async function currentObject(ctx: S3Context, bucket: string, key: string): Promise<ObjectRecord | null> {
  try {
    return await getObject(ctx.deps, ctx.caller, bucket, key);
  } catch (err) {
    if (toS3Error(err)?.code === 'NoSuchKey') return null;
    throw err;
  }
}

/** A delete's x-amz-if-match-size or DeleteObjects' `Size`. */
export function sizeCondition(value: unknown): number {
  const text = String(value).trim();
  if (!/^\d{1,15}$/.test(text)) throw new S3Error('InvalidArgument', 'the size to match is not a number of bytes');
  return Number(text);
}

/** A delete's x-amz-if-match-last-modified-time or DeleteObjects' `LastModifiedTime`: the second it names, in ms. */
export function timeCondition(value: unknown): number {
  const ms = Date.parse(String(value));
  if (Number.isNaN(ms)) throw new S3Error('InvalidArgument', 'the last-modified time to match is not a date');
  return Math.floor(ms / 1000) * 1000;
}

/** The request's conditions: If-Match, and If-None-Match for a write, or the size and time to
 * match for a delete; undefined: none. */
export function writeCondition(ctx: S3Context, kind: 'write' | 'delete'): (EtagCondition & DeleteCondition) | undefined {
  const header = (name: string) => {
    const value = ctx.req.headers[name];
    return value === undefined ? undefined : Array.isArray(value) ? value.join(',') : value;
  };
  const ifMatch = header('if-match');
  const ifNoneMatch = kind === 'write' ? header('if-none-match') : undefined;
  const size = kind === 'delete' ? header('x-amz-if-match-size') : undefined;
  const time = kind === 'delete' ? header('x-amz-if-match-last-modified-time') : undefined;
  if ([ifMatch, ifNoneMatch, size, time].every((v) => v === undefined)) return undefined;
  return {
    ...(ifMatch !== undefined ? { ifMatch: etagList(ifMatch) } : {}),
    ...(ifNoneMatch !== undefined ? { ifNoneMatch: etagList(ifNoneMatch) } : {}),
    ...(size !== undefined ? { size: sizeCondition(size) } : {}),
    ...(time !== undefined ? { modifiedAt: timeCondition(time) } : {}),
  };
}

/**
 * The request's condition, checked against the key's object now (throws when it does not
 * hold), to pass on to the write that checks it again atomically.
 */
export async function checkWriteConditions(
  ctx: S3Context,
  bucket: string,
  key: string,
  kind: 'write' | 'delete',
): Promise<(EtagCondition & DeleteCondition) | undefined> {
  const condition = writeCondition(ctx, kind);
  if (condition) checkCondition(condition, await currentObject(ctx, bucket, key), kind);
  return condition;
}
