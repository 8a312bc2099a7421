// The REST guard: `X-Api-Key: <key>` or `Authorization: Bearer <key>` (decisions.md), then
// the per-key rate limit with the usual RateLimit headers. The rules are the access use-cases'
// (api/usecases/access.ts); this only reads the headers and writes them.
import type { Request, RequestHandler } from 'express';
import { authenticate, countRequest } from '../../usecases/access.js';
import type { Caller, UseCaseDeps } from '../../usecases/deps.js';
import { RateLimited } from '../../usecases/errors.js';

declare module 'express-serve-static-core' {
  interface Request {
    caller?: Caller;
  }
}

/** The caller, for handlers behind the guard. */
export function caller(req: Request): Caller {
  if (!req.caller) throw new Error('caller() outside the guard');
  return req.caller;
}

function presentedKey(req: Request): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const authz = req.headers.authorization;
  const match = authz ? /^Bearer\s+(\S+)\s*$/i.exec(authz) : null;
  return match?.[1];
}

export function guard(deps: Pick<UseCaseDeps, 'db' | 'config'>): RequestHandler[] {
  return [
    async (req, _res, next) => {
      req.caller = await authenticate(deps, presentedKey(req));
      next();
    },
    async (req, res, next) => {
      const rate = await countRequest(deps, caller(req));
      res.set({
        'X-RateLimit-Limit': String(rate.limit),
        'X-RateLimit-Remaining': String(rate.remaining),
        'X-RateLimit-Reset': String(rate.resetS),
      });
      if (rate.exceeded) throw new RateLimited(rate.limit, rate.resetS);
      next();
    },
  ];
}
