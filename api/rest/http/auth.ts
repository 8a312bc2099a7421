// The REST guard: `X-Api-Key: <key>` or `Authorization: Bearer <key>` (docs/api/contract.md, "Authentication"), then
// the per-key rate limit with the usual RateLimit headers. The rules are the access use-cases'
// (core/access.ts); this only reads the headers and writes them.
import type express from 'express';
import type { Request, RequestHandler } from 'express';
import { authenticate, countRequest } from '../../../core/access.js';
import type { Caller, UseCaseDeps } from '../../../core/deps.js';
import { RateLimited, Unauthenticated } from '../../../core/errors.js';
import { authenticateSigned, takeTokenUse, type UploadGrant } from '../../../core/signed-tokens.js';

declare module 'express-serve-static-core' {
  interface Request {
    caller?: Caller;
    /** What a signed upload token allows, when the request came with one. */
    grant?: UploadGrant;
  }
}

/** The caller, for handlers behind the guard. */
export function caller(req: Request): Caller {
  if (!req.caller) throw new Error('caller() outside the guard');
  return req.caller;
}

const SIGNED = /^Signed\s+(\S+)\s*$/i;

function presentedKey(req: Request): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const authz = req.headers.authorization;
  if (authz && SIGNED.test(authz))
    throw new Unauthenticated('a signed upload token can only upload (POST /upload/new); use an API key here');
  const match = authz ? /^Bearer\s+(\S+)\s*$/i.exec(authz) : null;
  return match?.[1];
}

type Deps = Pick<UseCaseDeps, 'db' | 'config'>;

async function countRate(deps: Deps, req: Request, res: express.Response): Promise<void> {
  const rate = await countRequest(deps, caller(req));
  res.set({
    'X-RateLimit-Limit': String(rate.limit),
    'X-RateLimit-Remaining': String(rate.remaining),
    'X-RateLimit-Reset': String(rate.resetS),
  });
  if (rate.exceeded) throw new RateLimited(rate.limit, rate.resetS);
}

export function guard(deps: Deps): RequestHandler[] {
  return [
    async (req, res, next) => {
      req.caller = await authenticate(deps, presentedKey(req));
      await countRate(deps, req, res);
      next();
    },
  ];
}

/**
 * The guard of uploads: an API key, or `Authorization: Signed <token>` (docs/api/contract.md, "Signed upload tokens"). A token
 * acts as its owner, counts against the owner's request rate, and takes one of its uses after
 * that; the upload gives the use back if it fails (`Upload.abandon`).
 */
export function uploadGuard(deps: Deps): RequestHandler[] {
  const byKey = guard(deps);
  return [
    async (req, res, next) => {
      const signed = SIGNED.exec(req.headers.authorization ?? '');
      if (!signed || typeof req.headers['x-api-key'] === 'string') return next();
      const found = await authenticateSigned(deps, signed[1]!);
      req.caller = found.caller;
      await countRate(deps, req, res);
      req.grant = await takeTokenUse(deps, found);
      next();
    },
    ...byKey.map(
      (handler): RequestHandler =>
        (req, res, next) =>
          req.grant ? next() : handler(req, res, next),
    ),
  ];
}
