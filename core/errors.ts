// The failures a use-case reports, one class each, with no transport in them. Each surface
// maps them itself, in one table: REST to statuses and `{"error": {reason, details}}`
// (api/rest/errors.ts), the admin CLI to exit codes (api/cli/admin.ts), later the PSA to its
// `Failure` and S3 to its XML codes. `reason` is a stable UPPER_SNAKE code; `details` is for
// people.
import { ServiceError } from '@temporalio/client';
import { isConnectionFailure } from '../infra/db/errors.js';
import { LockTimeout } from '../infra/db/locks.js';
import { RETRY_AFTER_UNAVAILABLE_S } from '../infra/constants.js';

export class StupaError extends Error {
  constructor(
    readonly reason: string,
    readonly details: string,
  ) {
    super(details);
    this.name = new.target.name;
  }
}

/** The input is not acceptable (a bad CID, a field out of range, an unreadable CAR). */
export class InvalidInput extends StupaError {
  constructor(details: string, reason = 'INVALID_INPUT') {
    super(reason, details);
  }
}

/** No valid credentials. */
export class Unauthenticated extends StupaError {
  constructor(details = 'a valid API key is required (X-Api-Key or Authorization: Bearer)') {
    super('UNAUTHORIZED', details);
  }
}

/** A limit of the caller's plan; `reason` names it, e.g. API_KEY_LIMIT or STORAGE_LIMIT. */
export class LimitReached extends StupaError {}

/** The resource does not exist, or is another user's: the two are never told apart. */
export class NotFound extends StupaError {
  constructor(what = 'resource', reason = 'NOT_FOUND') {
    super(reason, `${what} not found`);
  }
}

/** The request contradicts the current state, e.g. LAST_API_KEY or EMAIL_TAKEN. */
export class Conflict extends StupaError {}

/** A write's condition on the current state does not hold (S3's If-Match, If-None-Match). */
export class PreconditionFailed extends Conflict {
  /** The condition as the request named it: If-Match, If-None-Match, x-amz-if-match-size, … */
  constructor(readonly condition: string) {
    super('PRECONDITION_FAILED', `the condition ${condition} does not hold`);
  }
}

/** Content the service will not serve here: no holder of it (the gateway is not an open proxy). */
export class Gone extends StupaError {}

/** Valid credentials that may not do this (a signed token past its uses or expiry). */
export class Forbidden extends StupaError {}

/** The content is larger than allowed (a signed token's maxFileSize). */
export class TooLarge extends StupaError {}

/** The content's type is not accepted (a signed token's allowedMimeTypes). */
export class UnsupportedContent extends StupaError {}

/** Well-formed input the service cannot process (an image too large to decode). */
export class Unprocessable extends StupaError {}

/** Too much work of one kind in flight (the image queue is full); retry after `retryAfterS`. */
export class Overloaded extends StupaError {
  constructor(
    details: string,
    readonly retryAfterS = 1,
  ) {
    super('OVERLOADED', details);
  }
}

/** Over the plan's request rate; retry after `retryAfterS`. */
export class RateLimited extends StupaError {
  constructor(
    readonly limitPerMinute: number,
    readonly retryAfterS: number,
  ) {
    super('RATE_LIMITED', `more than ${limitPerMinute} requests a minute with this API key; retry in ${retryAfterS} s`);
  }
}

/** A dependency (MongoDB, Temporal, Kubo, IPFS Cluster) does not answer; retry later. */
export class Unavailable extends StupaError {
  readonly retryAfterS = RETRY_AFTER_UNAVAILABLE_S;
  constructor(readonly dependency: string) {
    super('DEPENDENCY_UNAVAILABLE', `${dependency} is not reachable; retry later`);
  }
}

/** Another request of the same account holds a short lock for longer than we wait. */
export class Busy extends StupaError {
  readonly retryAfterS = 1;
  constructor() {
    super('BUSY', 'another request of this account is being processed; retry shortly');
  }
}

/**
 * The failure as a use-case error: itself, or what an infrastructure failure means to a
 * caller (a MongoDB or Temporal that does not answer, a lock held too long). Undefined for
 * anything else, which is a bug that the surface logs and answers as an internal error.
 */
export function asStupaError(err: unknown): StupaError | undefined {
  if (err instanceof StupaError) return err;
  // Connection failures only; other server errors (a duplicate key that escaped) are bugs.
  if (isConnectionFailure(err)) return new Unavailable('mongodb');
  // The Temporal client gives up on an unreachable frontend with a ServiceError.
  if (err instanceof ServiceError) return new Unavailable('temporal');
  if (err instanceof LockTimeout) return new Busy();
  return undefined;
}
