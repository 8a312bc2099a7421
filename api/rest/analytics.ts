import { Router } from 'express';
import { z } from 'zod';
import { analyticsPeriod, getAnalytics } from '../../core/analytics.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { getProfile } from '../../core/profile.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { parse } from './http/validate.js';

// `from`/`to`: milliseconds since the epoch or a UTC day; the use-case reads them.
const bound = z.string().min(1).max(32);
const analyticsQuery = z.strictObject({ from: bound.optional(), to: bound.optional() });

/** GET /analytics and GET /user/profile: what the caller's account has done and is. */
export function analyticsRoutes(deps: UseCaseDeps, { guard }: RouterOptions): Router {
  const router = Router();
  router.use(['/analytics', '/user/profile'], guard);

  resource(router, '/analytics', {
    get: async (req, res) => {
      const period = analyticsPeriod(parse(analyticsQuery, req.query, 'query'));
      res.json(await getAnalytics(deps, caller(req), period));
    },
  });

  resource(router, '/user/profile', {
    get: async (req, res) => {
      res.json(await getProfile(deps, caller(req)));
    },
  });

  return router;
}
