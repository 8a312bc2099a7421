import { Router } from 'express';
import { z } from 'zod';
import { API_KEY_MAX_EXPIRES_IN_S, API_KEY_MIN_EXPIRES_IN_S } from '../../infra/constants.js';
import { createApiKey, deleteApiKey, listApiKeys } from '../../core/apikeys.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const createBody = z
  .strictObject({
    name: z.string().trim().min(1).max(64).optional(),
    expiresIn: z.number().int().min(API_KEY_MIN_EXPIRES_IN_S).max(API_KEY_MAX_EXPIRES_IN_S).optional(),
  })
  .optional();

export function apiKeyRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use('/apikeys', guard);

  resource(router, '/apikeys', {
    post: [
      ...jsonBody(jsonLimit, { optional: true }),
      async (req, res) => {
        const body = parse(createBody, req.body) ?? {};
        const { user, plan } = caller(req);
        res.status(201).json(await createApiKey(deps, { userId: user._id, maxKeys: plan.apiKeys, ...body }));
      },
    ],
    get: async (req, res) => {
      res.json(await listApiKeys(deps, caller(req).user._id));
    },
  });

  resource(router, '/apikeys/:key', {
    delete: async (req, res) => {
      const { keyPrefix } = await deleteApiKey(deps, caller(req).user._id, String(req.params.key));
      res.json({ success: true, keyPrefix });
    },
  });

  return router;
}
