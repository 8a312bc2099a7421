import express, { Router, type Request } from 'express';
import { z } from 'zod';
import { caller } from '../http/auth.js';
import { resource, type RouterOptions } from '../http/routing.js';
import { parse } from '../http/validate.js';
import { ApiError, DependencyUnavailable, UnsupportedMediaType } from '../errors.js';
import { QUICK_USAGE_MS, assertStorageLeft, MB, metadataSchema } from '../content.js';
import { RETRY_AFTER_UNAVAILABLE_S } from '../../infra/constants.js';
import { decodeContent } from './decode.js';
import { readMultipart } from './multipart.js';
import { addToKubo, dagSize, dropCarRoot, importCar, recordFile, storageLimit, type UploadDeps } from './service.js';

const fileFields = {
  name: z.string().trim().min(1).max(255).optional(),
  description: z.string().max(1000).optional(),
  folderId: z.string().min(1).nullable().optional(),
  metadata: metadataSchema.optional(),
};

const jsonUpload = z.strictObject({
  content: z.unknown().refine((v) => v !== undefined, 'content is required'),
  encoding: z.literal('base64').optional(),
  ...fileFields,
});

const multipartFields = z.strictObject({
  ...fileFields,
  metadata: z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
        return z.NEVER;
      }
    })
    .pipe(metadataSchema)
    .optional(),
  car: z.enum(['true', 'false']).optional(),
});

/** Kubo unreachable or failing mid-add is 503; input errors pass through. */
function kuboFailure(err: unknown): Error {
  if (err instanceof ApiError) return err;
  return new DependencyUnavailable('kubo', RETRY_AFTER_UNAVAILABLE_S);
}

export function uploadRoutes(deps: UploadDeps, { guard, uploadJsonLimit }: RouterOptions & { uploadJsonLimit: string }): Router {
  const router = Router();
  router.use('/upload/new', guard);
  const json = express.json({ limit: uploadJsonLimit, type: ['application/json', 'application/*+json'] });

  async function fromJson(req: Request) {
    const body = parse(jsonUpload, req.body ?? {});
    const { bytes, mimeType } = decodeContent(body.content, body.encoding);
    const who = caller(req);
    if (bytes.length > who.plan.storageMB * MB - (await deps.db.usage(who.user._id))) throw storageLimit(who.plan);
    const cid = await addToKubo(deps, bytes).catch((err) => {
      throw kuboFailure(err);
    });
    return recordFile(deps, who, { cid, size: bytes.length, mimeType }, body);
  }

  async function fromMultipart(req: Request) {
    const who = caller(req);
    const left = who.plan.storageMB * MB - (await deps.db.usage(who.user._id));
    const declared = Number(req.headers['content-length'] ?? 0);
    // The body is larger than the file, so only a body far over the quota is refused early.
    if (declared > left + MB) throw storageLimit(who.plan);
    const isCar = (fields: Record<string, string>) => fields.car === 'true' || req.query.car === 'true';
    const upload = await readMultipart(
      req,
      (source, fields, signal) => (isCar(fields) ? importCar(deps, source, signal) : addToKubo(deps, source, signal)),
      { maxBytes: left, tooLarge: () => storageLimit(who.plan) },
    ).catch((err) => {
      throw kuboFailure(err);
    });
    const car = isCar(upload.fields);
    try {
      const { car: _car, ...record } = parse(multipartFields, upload.fields, 'form');
      const size = car
        ? await dagSize(deps.kubo, upload.file.cid).catch((err) => {
            throw kuboFailure(err);
          })
        : upload.file.bytes;
      return await recordFile(
        deps,
        who,
        { cid: upload.file.cid, size, mimeType: upload.file.mimeType },
        { name: upload.file.filename, ...record },
      );
    } catch (err) {
      if (car) await dropCarRoot(deps, upload.file.cid);
      throw err;
    }
  }

  resource(router, '/upload/new', {
    post: async (req, res, next) => {
      assertStorageLeft(await deps.db.usage(caller(req).user._id, { maxAgeMs: QUICK_USAGE_MS }), caller(req).plan);
      if (req.is('multipart/form-data')) {
        res.status(201).json(await fromMultipart(req));
      } else if (req.is(['application/json', 'application/*+json'])) {
        json(req, res, (err?: unknown) => {
          if (err) return next(err);
          fromJson(req).then((file) => res.status(201).json(file), next);
        });
      } else {
        throw new UnsupportedMediaType('application/json or multipart/form-data');
      }
    },
  });
  return router;
}
