// How the REST API answers failures: every one leaves as {"error": {"reason", "details"}}.
// Use-case errors (core/errors.ts) get their status from the one table below; the few
// failures that only HTTP has (a method, a media type, a body) are HttpErrors with their own
// status. Anything else is logged and answered 500 without internals.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '../../infra/logger.js';
import {
  asStupaError,
  Busy,
  Conflict,
  Forbidden,
  Gone,
  InvalidInput,
  LimitReached,
  NotFound,
  Overloaded,
  RateLimited,
  StupaError,
  Unauthenticated,
  Unavailable,
  UnsupportedContent,
  Unprocessable,
  TooLarge,
} from '../../core/errors.js';
import { HttpError } from '../http.js';

export { HttpError };

export const methodNotAllowed = (method: string, allowed: string[]) =>
  new HttpError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${allowed.join(', ')}`, { Allow: allowed.join(', ') });
export const unsupportedMediaType = (expected: string) =>
  new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', `the request body must be ${expected}`);
export const payloadTooLarge = (limit: string) => new HttpError(413, 'PAYLOAD_TOO_LARGE', `the request body is larger than ${limit}`);
const internal = () => new HttpError(500, 'INTERNAL_ERROR', 'an unexpected error happened; it has been logged');

/** The status of each use-case error, and the headers it carries. */
const TABLE: [new (...args: never[]) => StupaError, number, (err: never) => Record<string, string>][] = [
  [InvalidInput, 400, () => ({})],
  [Unauthenticated, 401, () => ({ 'WWW-Authenticate': 'Bearer' })],
  [LimitReached, 402, () => ({})],
  [Forbidden, 403, () => ({})],
  [NotFound, 404, () => ({})],
  [Conflict, 409, () => ({})],
  [Gone, 410, () => ({})],
  [TooLarge, 413, () => ({})],
  [UnsupportedContent, 415, () => ({})],
  [Unprocessable, 422, () => ({})],
  [RateLimited, 429, (err: RateLimited) => ({ 'Retry-After': String(err.retryAfterS) })],
  [Unavailable, 503, (err: Unavailable) => ({ 'Retry-After': String(err.retryAfterS) })],
  [Busy, 503, (err: Busy) => ({ 'Retry-After': String(err.retryAfterS) })],
  [Overloaded, 503, (err: Overloaded) => ({ 'Retry-After': String(err.retryAfterS) })],
];

function fromStupaError(err: StupaError): HttpError | undefined {
  const row = TABLE.find(([type]) => err instanceof type);
  return row && new HttpError(row[1], err.reason, err.details, row[2](err as never));
}

/** body-parser reports its failures with a `type`; the inflating of a gzip or deflate body with
 * zlib's error code only (Z_DATA_ERROR: the body is not what its Content-Encoding says). */
function fromBodyParser(err: unknown): HttpError | undefined {
  const e = err as { type?: string; limit?: number; code?: unknown };
  if (typeof e.code === 'string' && e.code.startsWith('Z_')) {
    return new HttpError(400, 'INVALID_BODY', 'the request body does not decode as its Content-Encoding says');
  }
  switch (e.type) {
    case 'entity.parse.failed':
      return new HttpError(400, 'INVALID_JSON', 'the request body is not valid JSON');
    case 'entity.too.large':
      return payloadTooLarge(`${e.limit} bytes`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return unsupportedMediaType('JSON in UTF-8 without an unsupported Content-Encoding');
    case 'request.aborted':
    case 'request.size.invalid':
      return new HttpError(400, 'INVALID_BODY', 'the request body ended early or did not match its Content-Length');
  }
  return undefined;
}

/** The router could not decode a path parameter (`%ff`): the path names nothing, as every
 * operation with parameters documents (404; the gateway, whose paths are content, says 400). */
function fromRouter(err: unknown): HttpError | undefined {
  if (err instanceof URIError && err.message.startsWith('Failed to decode param')) {
    return new HttpError(404, 'NOT_FOUND', 'no such path: it is not properly percent-encoded');
  }
  return undefined;
}

export const errorBody = (err: { reason: string; details: string }) => ({ error: { reason: err.reason, details: err.details } });

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const known = asStupaError(err);
    let answer = err instanceof HttpError ? err : known ? fromStupaError(known) : (fromBodyParser(err) ?? fromRouter(err));
    if (!answer) {
      logger.error({ err, method: req.method, path: req.path }, 'unhandled error');
      answer = internal();
    } else if (answer.status >= 500) {
      logger.warn({ err: { message: (err as Error).message }, path: req.path }, answer.reason);
    }
    res.status(answer.status).set(answer.headers).json(errorBody(answer));
  };
}

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new NotFound(`route ${req.method} ${req.path}`));
};
