// How the gateway answers failures: its own pages. A browser (Accept: text/html) gets a small
// HTML page, anything else the service's JSON error shape. Use-case errors get their status
// from the table below; a plan's bandwidth spent is 429 with Retry-After until the next UTC
// month (readers and CDNs retry a 429; a 402 would be final). No internals leave.
import type { ErrorRequestHandler } from 'express';
import type { Logger } from '../../infra/logger.js';
import { HttpError } from '../http.js';
import { secondsToNextMonth } from '../usecases/bandwidth.js';
import {
  asStupaError,
  Forbidden,
  Gone,
  InvalidInput,
  LimitReached,
  NotFound,
  StupaError,
  Unauthenticated,
  Unavailable,
} from '../usecases/errors.js';

const TABLE: [new (...args: never[]) => StupaError, number, (err: never) => Record<string, string>][] = [
  [InvalidInput, 400, () => ({})],
  [Unauthenticated, 401, () => ({})],
  [Forbidden, 403, () => ({})],
  [NotFound, 404, () => ({})],
  [Gone, 410, () => ({})],
  [LimitReached, 429, () => ({ 'Retry-After': String(secondsToNextMonth(Date.now())) })],
  [Unavailable, 503, (err: Unavailable) => ({ 'Retry-After': String(err.retryAfterS) })],
];

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function gatewayErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const known = asStupaError(err);
    const row = known && TABLE.find(([type]) => known instanceof type);
    let answer: HttpError;
    if (err instanceof HttpError) answer = err;
    else if (known && row) answer = new HttpError(row[1], known.reason, known.details, row[2](known as never));
    else {
      logger.error({ err, path: req.path }, 'unhandled gateway error');
      answer = new HttpError(500, 'INTERNAL_ERROR', 'an unexpected error happened; it has been logged');
    }
    res.status(answer.status).set(answer.headers).set('Cache-Control', 'no-store');
    if (req.accepts(['json', 'html']) === 'html') {
      const title = `${answer.status} ${escapeHtml(answer.reason)}`;
      res
        .type('html')
        .send(
          `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1><p>${escapeHtml(answer.details)}</p></body></html>\n`,
        );
    } else {
      res.json({ error: { reason: answer.reason, details: answer.details } });
    }
  };
}
