import { Router, type Request } from 'express';
import { z } from 'zod';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from '../../infra/constants.js';
import { cidInput } from '../../core/content.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { deleteFile, fileRef, getFileByCid, findFile, listFiles, moveFile, renameFile, type FileRecord } from '../../core/files.js';
import { contentLinkBase } from '../../core/gateway.js';
import { restFile } from '../../core/views.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const time = z.coerce.number().int().min(0);
const listQuery = z
  .strictObject({
    folderId: z.string().min(1).optional(),
    cid: z.string().min(1).optional(),
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

export function fileRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  // A file as the caller sees it: its links name the caller's gateway.
  const show = async (req: Request, f: FileRecord) => restFile(f, await contentLinkBase(deps, caller(req).user));
  router.use(['/upload/list', '/file', '/files'], guard);

  resource(router, '/upload/list', {
    get: async (req, res) => {
      const q = parse(listQuery, req.query, 'query');
      // `folderId=root` lists the files outside any folder.
      const folderId = q.folderId === 'root' ? null : q.folderId;
      const page = await listFiles(deps, caller(req).user._id, { ...q, folderId, cid: q.cid === undefined ? undefined : cidInput(q.cid) });
      const base = await contentLinkBase(deps, caller(req).user);
      res.json({ items: page.items.map((f) => restFile(f, base)), nextCursor: page.nextCursor });
    },
  });

  // The contract's read by CID: the newest of the caller's files of it, and how many there are.
  resource(router, '/file/:cid', {
    get: async (req, res) => {
      const { file, filesWithCid } = await getFileByCid(deps, caller(req).user._id, cidInput(String(req.params.cid)));
      res.json({ ...(await show(req, file)), filesWithCid });
    },
  });

  // One file, by its id or by a CID the caller has one file of (409 AMBIGUOUS_CID otherwise).
  const ref = (req: { params: Record<string, unknown> }) => fileRef(String(req.params.ref));

  resource(router, '/files/:ref', {
    get: async (req, res) => {
      res.json(await show(req, await findFile(deps, caller(req).user._id, ref(req))));
    },
    delete: async (req, res) => {
      const file = await deleteFile(deps, caller(req).user._id, ref(req));
      res.json({ success: true, id: file._id, cid: file.cid });
    },
  });

  resource(router, '/files/:ref/name', {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const { name } = parse(nameBody, req.body ?? {});
        res.json(await show(req, await renameFile(deps, caller(req).user._id, ref(req), name)));
      },
    ],
  });

  resource(router, '/files/:ref/move', {
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const { folderId } = parse(moveBody, req.body ?? {});
        res.json(await show(req, await moveFile(deps, caller(req).user._id, ref(req), folderId)));
      },
    ],
  });

  return router;
}
