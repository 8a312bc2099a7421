// The account's gateway, as the REST API sets it up: who may read it (PUT /gateway-settings)
// and its tokens (/gateway-tokens). The gateway itself is its own surface (api/gateway/).
import { Router } from 'express';
import { z } from 'zod';
import { API_KEY_MAX_EXPIRES_IN_S, API_KEY_MIN_EXPIRES_IN_S } from '../../infra/constants.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createGatewayToken, deleteGatewayToken, listGatewayTokens, updateGatewaySettings } from '../../core/gateway-access.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const settingsBody = z.strictObject({
  tokenRequired: z.boolean().optional(),
  ipAllowlist: z.array(z.string().min(1).max(64)).max(100).optional(),
  allowedOrigins: z.array(z.string().min(1).max(256)).max(100).optional(),
});

const tokenBody = z.strictObject({
  name: z.string().trim().min(1).max(64),
  expiresIn: z.number().int().min(API_KEY_MIN_EXPIRES_IN_S).max(API_KEY_MAX_EXPIRES_IN_S).optional(),
});

export function gatewayRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use(['/gateway-settings', '/gateway-tokens'], guard);

  resource(router, '/gateway-settings', {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        res.json(await updateGatewaySettings(deps, caller(req), parse(settingsBody, req.body ?? {})));
      },
    ],
  });

  resource(router, '/gateway-tokens', {
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        res.status(201).json(await createGatewayToken(deps, caller(req), parse(tokenBody, req.body ?? {})));
      },
    ],
    get: async (req, res) => {
      res.json(await listGatewayTokens(deps, caller(req)));
    },
  });

  resource(router, '/gateway-tokens/:prefix', {
    delete: async (req, res) => {
      const { tokenPrefix } = await deleteGatewayToken(deps, caller(req), String(req.params.prefix));
      res.json({ success: true, tokenPrefix });
    },
  });

  return router;
}
