// The one error handler: every failure leaves as {"error": {"reason", "details"}} with the
// status of its class in api/errors.ts. Anything unexpected is logged and answered 500
// without internals.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ServiceError } from '@temporalio/client';
import { LockTimeout } from '../../infra/db/locks.js';
import type { Logger } from '../../infra/logger.js';
import { RETRY_AFTER_UNAVAILABLE_S } from '../../infra/constants.js';
import {
  ApiError,
  Busy,
  DependencyUnavailable,
  Internal,
  InvalidInput,
  InvalidJson,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType,
} from '../errors.js';

export const errorBody = (err: ApiError) => ({ error: { reason: err.reason, details: err.details } });

/** body-parser reports its failures with a `type`; Mongo driver errors with their class name. */
function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const e = err as { type?: string; status?: number; name?: string; limit?: number; message?: string };
  switch (e.type) {
    case 'entity.parse.failed':
      return new InvalidJson();
    case 'entity.too.large':
      return new PayloadTooLarge(`${e.limit} bytes`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new UnsupportedMediaType('JSON in UTF-8 without an unsupported Content-Encoding');
    case 'request.aborted':
    case 'request.size.invalid':
      return new InvalidInput('the request body ended early or did not match its Content-Length', 'INVALID_BODY');
  }
  // Connection failures only; other server errors (a duplicate key that escaped) are bugs.
  if (
    e.name &&
    /^Mongo(Network|NetworkTimeout|NotConnected|ServerSelection|TopologyClosed)Error$|^MongooseServerSelectionError$/.test(e.name)
  ) {
    return new DependencyUnavailable('mongodb', RETRY_AFTER_UNAVAILABLE_S);
  }
  // The Temporal client gives up on an unreachable frontend with a ServiceError.
  if (err instanceof ServiceError) return new DependencyUnavailable('temporal', RETRY_AFTER_UNAVAILABLE_S);
  if (err instanceof LockTimeout) return new Busy();
  return undefined;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    let apiError = toApiError(err);
    if (!apiError) {
      logger.error({ err, method: req.method, path: req.path }, 'unhandled error');
      apiError = new Internal();
    } else if (apiError.status >= 500) {
      logger.warn({ err: { message: (err as Error).message }, path: req.path }, apiError.reason);
    }
    res.status(apiError.status).set(apiError.headers).json(errorBody(apiError));
  };
}

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new NotFound(`route ${req.method} ${req.path}`));
};
