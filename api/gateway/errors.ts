// How the gateway answers failures: its own pages. A browser (its Accept names text/html) gets
// a small HTML page, anything else the service's JSON error shape; a choice between two
// renderings of one error, not content negotiation worth a library. Use-case errors get their
// status from the table below; a plan's bandwidth spent is 429 with Retry-After until the next
// UTC month (readers and CDNs retry a 429; a 402 would be final). No internals leave.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../infra/logger.js';
import { HttpError } from '../http.js';
import { secondsToNextMonth } from '../../core/bandwidth.js';
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
} from '../../core/errors.js';

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

function answerOf(logger: Logger, req: IncomingMessage, err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const known = asStupaError(err);
  const row = known && TABLE.find(([type]) => known instanceof type);
  if (known && row) return new HttpError(row[1], known.reason, known.details, row[2](known as never));
  logger.error({ err, path: (req.url ?? '').split('?')[0] }, 'unhandled gateway error');
  return new HttpError(500, 'INTERNAL_ERROR', 'an unexpected error happened; it has been logged');
}

export function sendError(logger: Logger, req: IncomingMessage, res: ServerResponse, err: unknown): void {
  const answer = answerOf(logger, req, err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const html = /text\/html/.test(req.headers.accept ?? '');
  const body = html
    ? `<!doctype html><html><head><meta charset="utf-8"><title>${answer.status} ${escapeHtml(answer.reason)}</title></head><body><h1>${answer.status} ${escapeHtml(answer.reason)}</h1><p>${escapeHtml(answer.details)}</p></body></html>\n`
    : JSON.stringify({ error: { reason: answer.reason, details: answer.details } });
  res.writeHead(answer.status, {
    ...answer.headers,
    'Cache-Control': 'no-store',
    'Content-Type': html ? 'text/html; charset=utf-8' : 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
