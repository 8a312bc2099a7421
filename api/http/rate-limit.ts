// Per-key rate limit from the caller's plan (`requestsPerMinute`), counted in MongoDB so
// every API process shares it. Fixed one-minute windows: a client over the limit is told
// exactly when the window ends (Retry-After) and the usual RateLimit headers show where
// it stands.
import type { RequestHandler } from 'express';
import type { RateLimitStore } from '../../infra/db/rate-limits.js';
import { RATE_WINDOW_MS } from '../../infra/constants.js';
import { RateLimited } from '../errors.js';
import { caller } from './auth.js';

export function rateLimit(store: RateLimitStore): RequestHandler {
  return async (req, res, next) => {
    const { key, plan } = caller(req);
    const now = Date.now();
    const windowStart = now - (now % RATE_WINDOW_MS);
    const count = await store.hit(key._id, windowStart, RATE_WINDOW_MS);
    const resetS = Math.max(1, Math.ceil((windowStart + RATE_WINDOW_MS - now) / 1000));
    const limit = plan.requestsPerMinute;
    res.set({
      'X-RateLimit-Limit': String(limit),
      'X-RateLimit-Remaining': String(Math.max(0, limit - count)),
      'X-RateLimit-Reset': String(resetS),
    });
    if (count > limit) throw new RateLimited(limit, resetS);
    next();
  };
}
