// POST /upload/new: parses JSON or multipart and maps; the upload use-case does the rest.
import express, { Router, type Request, type Response } from 'express';
import { z } from 'zod';
import { metadataSchema } from '../../../core/content.js';
import type { UseCaseDeps } from '../../../core/deps.js';
import { beginUpload, type Upload } from '../../../core/uploads.js';
import { unsupportedMediaType } from '../errors.js';
import { restFile } from '../../../core/views.js';
import { contentLinkBase } from '../../../core/gateway.js';
import { caller, uploadGuard } from '../http/auth.js';
import { resource, type RouterOptions } from '../http/routing.js';
import { declaredOver, limitBytes, parse } from '../http/validate.js';
import { decodeContent } from './decode.js';
import { readMultipart } from './form-upload.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

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

/** `car=true`: the multipart file is a CAR whose single root becomes the file. */
const uploadQuery = z.strictObject({ car: z.enum(['true', 'false']).optional() });

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

export function uploadRoutes(deps: UseCaseDeps, { uploadJsonLimit }: RouterOptions & { uploadJsonLimit: string }): Router {
  const router = Router();
  // An API key, or a signed upload token (which may do nothing else).
  router.use('/upload/new', uploadGuard(deps));
  const jsonParser = express.json({ limit: uploadJsonLimit, type: JSON_TYPES });
  const jsonMax = limitBytes(uploadJsonLimit);

  async function fromJson(req: Request, res: Response, upload: Upload) {
    const over = declaredOver(req, jsonMax);
    if (over) throw over;
    await new Promise<void>((resolve, reject) => jsonParser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
    const { content, encoding, ...details } = parse(jsonUpload, req.body ?? {});
    const { bytes, mimeType } = decodeContent(content, encoding);
    return upload.record(await upload.add(bytes, { mimeType }), () => ({ ...details, mimeType }));
  }

  async function fromMultipart(req: Request, upload: Upload, query: z.infer<typeof uploadQuery>) {
    const isCar = (fields: Record<string, string>) => fields.car === 'true' || query.car === 'true';
    const { fields, file } = await readMultipart(
      req,
      ({ source, fields: seen, signal, mimeType, framing }) => upload.add(source, { car: isCar(seen), signal, mimeType, framing }),
      (seen) => !isCar(seen) && upload.takesFraming,
    );
    return upload.record(file.added, () => {
      const { car: _car, ...details } = parse(multipartFields, fields, 'form');
      return { name: file.filename, ...details, mimeType: file.mimeType };
    });
  }

  async function handle(req: Request, res: Response) {
    const query = parse(uploadQuery, req.query, 'query');
    const multipart = req.is('multipart/form-data');
    if (!multipart && !req.is(JSON_TYPES)) throw unsupportedMediaType('application/json or multipart/form-data');
    // Before a byte is read: refused when the account is full. A multipart body's length
    // counts too (less some framing); a JSON body's does not (base64 is longer than its bytes).
    const declaredBytes = multipart ? Number(req.headers['content-length'] ?? 0) : undefined;
    const upload = await beginUpload(deps, caller(req), { declaredBytes, grant: req.grant });
    const file = multipart ? await fromMultipart(req, upload, query) : await fromJson(req, res, upload);
    res.status(201).json(restFile(file, await contentLinkBase(deps, caller(req).user)));
  }

  resource(router, '/upload/new', {
    post: async (req, res) => {
      try {
        await handle(req, res);
      } catch (err) {
        // Whatever failed, a signed token's use goes back.
        await req.grant?.release();
        throw err;
      }
    },
  });
  return router;
}
