import { Router } from 'express';
import { z } from 'zod';
import { cidInput, metadataSchema, origin } from '../../core/content.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { InvalidInput } from '../../core/errors.js';
import { deletePin, getPin, requestPin } from '../../core/pins.js';
import { restPin } from '../../core/views.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const pinBody = z.strictObject({
  cid: z.string().min(1),
  name: z.string().max(255).optional(),
  description: z.string().max(1000).optional(),
  origins: z.array(origin).max(20).default([]),
  metadata: metadataSchema.default({}),
});

export function pinRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  // The contract names both /pin and /pins; they are the same operations.
  for (const base of ['/pin', '/pins']) {
    router.use(base, guard);
    resource(router, base, {
      post: [
        ...jsonBody(jsonLimit),
        async (req, res) => {
          if (req.body === undefined) throw new InvalidInput('a JSON body with `cid` is required');
          const body = parse(pinBody, req.body);
          const pin = await requestPin(deps, caller(req), { ...body, cid: cidInput(body.cid) });
          res.status(202).json(restPin(pin));
        },
      ],
    });
    resource(router, `${base}/:cid`, {
      get: async (req, res) => {
        const cid = cidInput(String(req.params.cid));
        const pin = await getPin(deps, caller(req).user._id, cid);
        res.json({ ...restPin(pin), peers: await deps.peers.of(cid) });
      },
      delete: async (req, res) => {
        const { cid } = await deletePin(deps, caller(req).user._id, cidInput(String(req.params.cid)));
        res.json({ success: true, cid });
      },
    });
  }
  return router;
}
