// What every HTTP surface (REST API, gateway, later S3) shares: the error of an HTTP exchange
// itself, and the request log. Each surface maps use-case errors with its own table.
import type { RequestHandler } from 'express';
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

/**
 * One log line per request when it ends: method, path and status only (headers carry
 * credentials, query strings tokens), and how long it took; 5xx at `error`, the rest at `info`.
 * `quiet` paths (probes: the edge checks /readyz every 2 s) are logged only when they fail.
 * Written here rather than with pino-http, which made a child logger and serialisers for every
 * request even at levels that log none of them: a tenth of the CPU of a status read.
 */
export function requestLog(logger: Logger, quiet: string[] = []): RequestHandler {
  let nextId = 0;
  return (req, res, next) => {
    if (!logger.isLevelEnabled('info') && !logger.isLevelEnabled('error')) return next();
    const started = performance.now();
    const id = ++nextId;
    res.once('finish', () => {
      const path = req.originalUrl.split('?')[0]!;
      const failed = res.statusCode >= 500;
      if ((quiet.includes(path) && !failed) || !logger.isLevelEnabled(failed ? 'error' : 'info')) return;
      const line = {
        req: { id, method: req.method, path },
        res: { statusCode: res.statusCode },
        responseTime: Math.round(performance.now() - started),
      };
      if (failed) logger.error(line, 'request errored');
      else logger.info(line, 'request completed');
    });
    next();
  };
}
