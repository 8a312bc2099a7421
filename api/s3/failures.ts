// The S3 surface's one table from use-case errors (core/errors.ts) to S3's error
// codes. Reasons the use-cases give for S3's own cases map one to one; the rest by class.
import {
  asStupaError,
  Conflict,
  Forbidden,
  Gone,
  InvalidInput,
  LimitReached,
  NotFound,
  Overloaded,
  PreconditionFailed,
  RateLimited,
  StupaError,
  TooLarge,
  Unauthenticated,
  Unavailable,
  Unprocessable,
  UnsupportedContent,
} from '../../core/errors.js';
import { S3Error, type S3ErrorCode } from './errors.js';

const BY_REASON: Record<string, S3ErrorCode> = {
  NO_SUCH_BUCKET: 'NoSuchBucket',
  NO_SUCH_KEY: 'NoSuchKey',
  NO_SUCH_UPLOAD: 'NoSuchUpload',
  BUCKET_TAKEN: 'BucketAlreadyExists',
  BUCKET_OWNED: 'BucketAlreadyOwnedByYou',
  BUCKET_NOT_EMPTY: 'BucketNotEmpty',
  INVALID_BUCKET_NAME: 'InvalidBucketName',
  TOO_MANY_BUCKETS: 'TooManyBuckets',
  ACCESS_DENIED: 'AccessDenied',
  INVALID_KEY: 'KeyTooLongError',
  INVALID_PART: 'InvalidPart',
  INVALID_PART_ORDER: 'InvalidPartOrder',
  INVALID_PART_NUMBER: 'InvalidArgument',
  ENTITY_TOO_SMALL: 'EntityTooSmall',
  ENTITY_TOO_LARGE: 'EntityTooLarge',
  MALFORMED_PART_LIST: 'MalformedXML',
  NO_CORS_CONFIGURATION: 'NoSuchCORSConfiguration',
  INVALID_CORS: 'MalformedXML',
  STORAGE_LIMIT: 'QuotaExceeded',
  BAD_DIGEST: 'BadDigest',
  CHECKSUM_TYPE_MISMATCH: 'InvalidRequest',
  CHECKSUM_MODE_MISMATCH: 'InvalidRequest',
};

/** The S3 error for anything a handler threw; undefined for a bug (answered InternalError). */
export function toS3Error(err: unknown): S3Error | undefined {
  if (err instanceof S3Error) return err;
  const known = asStupaError(err);
  if (!known) return undefined;
  if (known instanceof PreconditionFailed)
    return new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
      Condition: known.condition,
    });
  const code = BY_REASON[known.reason];
  if (code) return new S3Error(code, known.details);
  // A service that is back in a moment says when, as the REST API does (SDKs back off anyway).
  const retry = 'retryAfterS' in known && typeof known.retryAfterS === 'number' ? { 'retry-after': String(known.retryAfterS) } : undefined;
  return new S3Error(byClass(known), known.details, {}, retry);
}

function byClass(err: StupaError): S3ErrorCode {
  if (err instanceof RateLimited || err instanceof Overloaded || err instanceof Unavailable) return 'SlowDown';
  if (err instanceof Unauthenticated || err instanceof Forbidden) return 'AccessDenied';
  if (err instanceof NotFound || err instanceof Gone) return 'NoSuchKey';
  if (err instanceof LimitReached) return 'QuotaExceeded';
  if (err instanceof TooLarge) return 'EntityTooLarge';
  if (err instanceof Conflict) return 'OperationAborted';
  if (err instanceof UnsupportedContent || err instanceof Unprocessable || err instanceof InvalidInput) return 'InvalidArgument';
  return 'InvalidRequest';
}
