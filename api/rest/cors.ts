import { Router } from 'express';
import { z } from 'zod';
import { deleteCors, getCors, putCors } from '../../core/cors.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

// The JSON types only (400 INVALID_INPUT for a wrong type or an unknown field). What S3 checks,
// required fields included, is the use-case's (400 INVALID_CORS), so the S3 interface's
// PutBucketCors will refuse the same configurations.
const strings = z.array(z.string()).optional();
const corsBody = z.strictObject({
  CORSRules: z
    .array(
      z.strictObject({
        AllowedOrigins: strings,
        AllowedMethods: strings,
        AllowedHeaders: strings,
        ExposeHeaders: strings,
        MaxAgeSeconds: z.number().optional(),
        ID: z.string().optional(),
      }),
    )
    .optional(),
});

/** `/folders/:folderId/cors` only: the folders router owns `/folders` and its other paths. */
export function corsRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  const path = '/folders/:folderId/cors';
  router.use(path, guard);

  resource(router, path, {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const input = parse(corsBody, req.body ?? {});
        res.json(await putCors(deps, caller(req).user._id, String(req.params.folderId), input));
      },
    ],
    get: async (req, res) => {
      res.json(await getCors(deps, caller(req).user._id, String(req.params.folderId)));
    },
    delete: async (req, res) => {
      const { folderId } = await deleteCors(deps, caller(req).user._id, String(req.params.folderId));
      res.json({ success: true, folderId });
    },
  });

  return router;
}
