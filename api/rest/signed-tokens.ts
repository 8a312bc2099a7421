// Signed upload tokens: made, listed and revoked with an API key; used on POST /upload/new
// (api/rest/uploads/routes.ts) with `Authorization: Signed <token>`.
import { Router } from 'express';
import { z } from 'zod';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, SIGNED_TOKEN_MAX_EXPIRES_IN_S } from '../../infra/constants.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createSignedToken, listSignedTokens, revokeSignedToken } from '../../core/signed-tokens.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const mimePattern = z
  .string()
  .regex(/^([\w.+-]+\/([\w.+-]+|\*)|\*\/\*)$/, 'must be a MIME type like image/png, or a wildcard like image/* or */*');

const createBody = z
  .strictObject({
    name: z.string().trim().min(1).max(64).optional(),
    expiresIn: z.number().int().min(1).max(SIGNED_TOKEN_MAX_EXPIRES_IN_S).optional(),
    maxFileSize: z.number().int().min(1).optional(),
    allowedMimeTypes: z.array(mimePattern).min(1).max(50).optional(),
    folderId: z.string().min(1).optional(),
    maxUses: z.number().int().min(1).max(1_000_000).optional(),
  })
  .optional();

const listQuery = z.strictObject({
  cursor: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_MAX_LIMIT).default(LIST_DEFAULT_LIMIT),
});

export function signedTokenRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use(['/upload/signed-url', '/signed-tokens'], guard);

  resource(router, '/upload/signed-url', {
    post: [
      ...jsonBody(jsonLimit, { optional: true }),
      async (req, res) => {
        const body = parse(createBody, req.body) ?? {};
        res.status(201).json(await createSignedToken(deps, caller(req), body));
      },
    ],
  });

  resource(router, '/signed-tokens', {
    get: async (req, res) => {
      res.json(await listSignedTokens(deps, caller(req), parse(listQuery, req.query, 'query')));
    },
  });

  resource(router, '/signed-tokens/:tokenId', {
    delete: async (req, res) => {
      const { tokenId } = await revokeSignedToken(deps, caller(req), String(req.params.tokenId));
      res.json({ success: true, tokenId });
    },
  });

  return router;
}
