import express, { type RequestHandler } from 'express';
import type { z } from 'zod';
import { InvalidInput } from '../../../core/errors.js';
import { payloadTooLarge, unsupportedMediaType } from '../errors.js';

/** Parses `value` with `schema`, or throws 400 naming every wrong field. */
export function parse<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = result.error.issues.map((i) => `${[where, ...i.path].join('.')}: ${i.message}`).join('; ');
  throw new InvalidInput(details);
}

const hasBody = (req: express.Request): boolean =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };
/** A limit as config allows it (`512kb`, `1mb`: infra/config.ts), in bytes, read as body-parser
 * reads it (binary units). */
export const limitBytes = (limit: string): number => {
  const [, n, unit] = /^(\d+)(b|kb|mb)$/i.exec(limit) ?? [];
  return Number(n) * UNITS[(unit ?? 'b').toLowerCase()]!;
};

/**
 * 413 for a body whose declared length is over `max` bytes, before a byte of it is read:
 * body-parser answers 413 only once it has read the whole declared body, so a client sending
 * 100 MB learned it at the end (and one declaring more than it sends, never).
 */
export function declaredOver(req: express.Request, max: number): Error | undefined {
  return Number(req.headers['content-length']) > max ? payloadTooLarge(`${max} bytes`) : undefined;
}

/**
 * JSON bodies only: parses application/json (and +json) and answers 415 for any other type, and
 * 400 for a request without a body unless the operation's body is `optional` (as openapi.json
 * says: `requestBody.required`). Without the check, an operation whose fields are all optional
 * (PUT /gateway-settings) took a bare PUT as `{}` and answered 200, where the contract says the
 * body is required (found by schemathesis).
 */
export function jsonBody(limit: string, { optional = false }: { optional?: boolean } = {}): RequestHandler[] {
  const max = limitBytes(limit);
  return [
    (req, _res, next) => {
      if (!hasBody(req)) next(optional ? undefined : new InvalidInput('a JSON body is required (Content-Type: application/json)'));
      else if (!req.is(['application/json', 'application/*+json'])) next(unsupportedMediaType('application/json'));
      else next(declaredOver(req, max));
    },
    express.json({ limit, type: ['application/json', 'application/*+json'] }),
  ];
}
