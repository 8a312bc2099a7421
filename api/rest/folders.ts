import { Router } from 'express';
import { z } from 'zod';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from '../../infra/constants.js';
import { cidInput } from '../../core/content.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createFolder, deleteFolder, getFolder, listFolders, updateFolder, type FolderView } from '../../core/folders.js';
import { deleteSnapshot, listSnapshots, snapshotStatus, startSnapshot, type SnapshotJobView } from '../../core/snapshots.js';
import { restSnapshot } from '../../core/views.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

/** A folder as the REST API shows it (docs/api/contract.md, "Folders"). */
export const restFolder = (f: FolderView) => ({
  folderId: f._id,
  name: f.name,
  parentFolderId: f.parentFolderId,
  createdAt: f.createdAt,
  updatedAt: f.updatedAt,
  fileCount: f.fileCount,
  latestSnapshot: f.latestSnapshot && {
    cid: f.latestSnapshot.cid,
    takenAt: f.latestSnapshot.takenAt,
    fileCount: f.latestSnapshot.fileCount,
  },
});

const restJob = (j: SnapshotJobView) => ({
  id: j.id,
  folderId: j.folderId,
  status: j.status,
  progress: j.progress,
  snapshot: j.snapshot && restSnapshot(j.snapshot),
});

const folderId = z.string().min(1).max(64);
const page = {
  cursor: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_MAX_LIMIT).default(LIST_DEFAULT_LIMIT),
};
const createBody = z.strictObject({ name: z.string(), parentFolderId: folderId.nullable().optional() });
const updateBody = z
  .strictObject({ name: z.string().optional(), parentFolderId: folderId.nullable().optional() })
  .refine((b) => b.name !== undefined || b.parentFolderId !== undefined, { message: 'give name, parentFolderId or both' });
// `parentFolderId=root` lists the top level.
const listQuery = z.strictObject({ parentFolderId: folderId.optional(), ...page });
const deleteQuery = z.strictObject({ recursive: z.enum(['true', 'false']).default('false') });
const pageQuery = z.strictObject(page);

const PATHS = [
  '/folders',
  '/folders/:folderId',
  '/folders/:folderId/snapshot',
  '/folders/:folderId/snapshots',
  '/folders/:folderId/snapshots/:cid',
];

export function folderRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  // Exact paths, not the /folders prefix: other routers own other paths below /folders.
  router.all(PATHS, ...guard);
  const id = (params: Record<string, unknown>) => String(params.folderId);

  resource(router, '/folders', {
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const body = parse(createBody, req.body ?? {});
        res.status(201).json(restFolder(await createFolder(deps, caller(req).user._id, body)));
      },
    ],
    get: async (req, res) => {
      const q = parse(listQuery, req.query, 'query');
      const parentFolderId = q.parentFolderId === 'root' ? null : q.parentFolderId;
      const page = await listFolders(deps, caller(req).user._id, { ...q, parentFolderId });
      res.json({ items: page.items.map(restFolder), nextCursor: page.nextCursor });
    },
  });

  resource(router, '/folders/:folderId', {
    get: async (req, res) => {
      res.json(restFolder(await getFolder(deps, caller(req).user._id, id(req.params))));
    },
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const body = parse(updateBody, req.body ?? {});
        res.json(restFolder(await updateFolder(deps, caller(req).user._id, id(req.params), body)));
      },
    ],
    delete: async (req, res) => {
      const { recursive } = parse(deleteQuery, req.query, 'query');
      await deleteFolder(deps, caller(req).user._id, id(req.params), recursive === 'true');
      res.json({ success: true, folderId: id(req.params) });
    },
  });

  resource(router, '/folders/:folderId/snapshot', {
    // 202 while the job runs, 200 when the folder's current content is snapshotted already.
    post: async (req, res) => {
      const job = await startSnapshot(deps, caller(req).user._id, id(req.params));
      res.status(job.status === 'complete' ? 200 : 202).json(restJob(job));
    },
    get: async (req, res) => {
      res.json(restJob(await snapshotStatus(deps, caller(req).user._id, id(req.params))));
    },
  });

  resource(router, '/folders/:folderId/snapshots', {
    get: async (req, res) => {
      const q = parse(pageQuery, req.query, 'query');
      const found = await listSnapshots(deps, caller(req).user._id, id(req.params), q);
      res.json({ items: found.items.map(restSnapshot), nextCursor: found.nextCursor });
    },
  });

  resource(router, '/folders/:folderId/snapshots/:cid', {
    delete: async (req, res) => {
      const { cid } = await deleteSnapshot(deps, caller(req).user._id, id(req.params), cidInput(String(req.params.cid)));
      res.json({ success: true, cid });
    },
  });

  return router;
}
