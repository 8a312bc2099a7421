import { Router } from 'express';
import { z } from 'zod';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from '../../infra/constants.js';
import { caller } from '../http/auth.js';
import { resource, type RouterOptions } from '../http/routing.js';
import { jsonBody, parse } from '../http/validate.js';
import { cidParam } from '../content.js';
import { getFile, listFiles, moveFile, renameFile, type FileDeps } from './service.js';

const time = z.coerce.number().int().min(0);
const listQuery = z
  .strictObject({
    folderId: z.string().min(1).optional(),
    name: z.string().min(1).max(255).optional(),
    mimeType: z
      .string()
      .regex(/^[\w.+-]+\/([\w.+-]+|\*)$/, 'must be a MIME type like image/png or image/*')
      .optional(),
    from: time.optional(),
    to: time.optional(),
    cursor: z.string().min(1).optional(),
    limit: z.coerce.number().int().min(1).max(LIST_MAX_LIMIT).default(LIST_DEFAULT_LIMIT),
  })
  .refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { message: 'from must be before to' });

const nameBody = z.strictObject({ name: z.string().trim().min(1).max(255) });
const moveBody = z.strictObject({ folderId: z.string().min(1).nullable() });

export function fileRoutes(deps: FileDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use(['/upload/list', '/file', '/files'], guard);

  resource(router, '/upload/list', {
    get: async (req, res) => {
      const q = parse(listQuery, req.query, 'query');
      // `folderId=root` lists the files outside any folder.
      const folderId = q.folderId === 'root' ? null : q.folderId;
      res.json(await listFiles(deps, caller(req).user._id, { ...q, folderId }));
    },
  });

  resource(router, '/file/:cid', {
    get: async (req, res) => {
      res.json(await getFile(deps, caller(req).user._id, cidParam(String(req.params.cid))));
    },
  });

  resource(router, '/files/:cid/name', {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const { name } = parse(nameBody, req.body ?? {});
        res.json(await renameFile(deps, caller(req).user._id, cidParam(String(req.params.cid)), name));
      },
    ],
  });

  resource(router, '/files/:cid/move', {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const { folderId } = parse(moveBody, req.body ?? {});
        res.json(await moveFile(deps, caller(req).user._id, cidParam(String(req.params.cid)), folderId));
      },
    ],
  });

  return router;
}
