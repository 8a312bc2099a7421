// Every failure the HTTP API answers with, one class each. The error handler
// (api/http/error-handler.ts) turns them into the body every endpoint shares:
//   {"error": {"reason": "UPPER_SNAKE_CODE", "details": "human text"}}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly details: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(details);
    this.name = new.target.name;
  }
}

export class InvalidInput extends ApiError {
  constructor(details: string, reason = 'INVALID_INPUT') {
    super(400, reason, details);
  }
}

export class InvalidJson extends ApiError {
  constructor() {
    super(400, 'INVALID_JSON', 'the request body is not valid JSON');
  }
}

export class Unauthorized extends ApiError {
  constructor(details = 'a valid API key is required (X-Api-Key or Authorization: Bearer)') {
    super(401, 'UNAUTHORIZED', details, { 'WWW-Authenticate': 'Bearer' });
  }
}

export class PlanLimitReached extends ApiError {
  /** `limit` names the plan limit, e.g. API_KEY_LIMIT or STORAGE_LIMIT. */
  constructor(limit: string, details: string) {
    super(402, limit, details);
  }
}

export class Forbidden extends ApiError {
  constructor(details: string) {
    super(403, 'FORBIDDEN', details);
  }
}

export class NotFound extends ApiError {
  constructor(what = 'resource') {
    super(404, 'NOT_FOUND', `${what} not found`);
  }
}

export class MethodNotAllowed extends ApiError {
  constructor(method: string, allowed: string[]) {
    super(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${allowed.join(', ')}`, { Allow: allowed.join(', ') });
  }
}

export class Conflict extends ApiError {
  constructor(reason: string, details: string) {
    super(409, reason, details);
  }
}

export class LastKey extends Conflict {
  constructor() {
    super('LAST_API_KEY', 'this is your last usable API key; create another one before deleting it');
  }
}

export class EmailTaken extends Conflict {
  constructor(email: string) {
    super('EMAIL_TAKEN', `a user with email ${email} exists`);
  }
}

export class PayloadTooLarge extends ApiError {
  constructor(limit: string) {
    super(413, 'PAYLOAD_TOO_LARGE', `the request body is larger than ${limit}`);
  }
}

export class UnsupportedMediaType extends ApiError {
  constructor(expected: string) {
    super(415, 'UNSUPPORTED_MEDIA_TYPE', `the request body must be ${expected}`);
  }
}

export class RateLimited extends ApiError {
  constructor(limitPerMinute: number, retryAfterS: number) {
    super(429, 'RATE_LIMITED', `more than ${limitPerMinute} requests a minute with this API key; retry in ${retryAfterS} s`, {
      'Retry-After': String(retryAfterS),
    });
  }
}

export class DependencyUnavailable extends ApiError {
  constructor(dependency: string, retryAfterS: number) {
    super(503, 'DEPENDENCY_UNAVAILABLE', `${dependency} is not reachable; retry later`, { 'Retry-After': String(retryAfterS) });
  }
}

/** Another request of the same user holds a short lock for longer than we wait. */
export class Busy extends ApiError {
  constructor() {
    super(503, 'BUSY', 'another request of this account is being processed; retry shortly', { 'Retry-After': '1' });
  }
}

export class Internal extends ApiError {
  constructor() {
    super(500, 'INTERNAL_ERROR', 'an unexpected error happened; it has been logged');
  }
}
