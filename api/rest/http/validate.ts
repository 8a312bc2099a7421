import express, { type RequestHandler } from 'express';
import type { z } from 'zod';
import { InvalidInput } from '../../usecases/errors.js';
import { unsupportedMediaType } from '../errors.js';

/** Parses `value` with `schema`, or throws 400 naming every wrong field. */
export function parse<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = result.error.issues.map((i) => `${[where, ...i.path].join('.')}: ${i.message}`).join('; ');
  throw new InvalidInput(details);
}

const hasBody = (req: express.Request): boolean =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/**
 * JSON bodies only: parses application/json (and +json) and answers 415 for any other type, and
 * 400 for a request without a body unless the operation's body is `optional` (as openapi.json
 * says: `requestBody.required`). Without the check, an operation whose fields are all optional
 * (PUT /gateway-settings) took a bare PUT as `{}` and answered 200, where the contract says the
 * body is required (found by schemathesis).
 */
export function jsonBody(limit: string, { optional = false }: { optional?: boolean } = {}): RequestHandler[] {
  return [
    (req, _res, next) => {
      if (!hasBody(req)) next(optional ? undefined : new InvalidInput('a JSON body is required (Content-Type: application/json)'));
      else if (!req.is(['application/json', 'application/*+json'])) next(unsupportedMediaType('application/json'));
      else next();
    },
    express.json({ limit, type: ['application/json', 'application/*+json'] }),
  ];
}
