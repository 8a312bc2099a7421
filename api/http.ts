// What every HTTP surface (REST API, gateway, later S3) shares: the error of an HTTP exchange
// itself, and the request log. Each surface maps use-case errors with its own table.
import type { RequestHandler } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../infra/logger.js';

/** A failure of the HTTP exchange itself (a method, a media type, a body), or a surface's own answer to one. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly details: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(details);
    this.name = 'HttpError';
  }
}

/** One log line per request: method, path and status only (headers carry credentials, query strings tokens). */
export function requestLog(logger: Logger, quiet: string[] = []): RequestHandler {
  return pinoHttp({
    logger,
    serializers: {
      req: (req: { id: unknown; method: string; url: string }) => ({ id: req.id, method: req.method, path: req.url.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    autoLogging: { ignore: (req) => quiet.includes(req.url ?? '') },
  });
}
