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

/** JSON bodies only: parses application/json (and +json) and answers 415 for any other type. */
export function jsonBody(limit: string): RequestHandler[] {
  return [
    (req, _res, next) => {
      if (hasBody(req) && !req.is(['application/json', 'application/*+json'])) next(unsupportedMediaType('application/json'));
      else next();
    },
    express.json({ limit, type: ['application/json', 'application/*+json'] }),
  ];
}
