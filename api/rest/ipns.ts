import { Router } from 'express';
import { z } from 'zod';
import type { UseCaseDeps } from '../../core/deps.js';
import { InvalidInput } from '../../core/errors.js';
import { createIpnsName, deleteIpnsName, dnsLinkFor, getIpnsName, listIpnsNames, publishIpns, resolveIpns } from '../../core/ipns.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const keyBody = z.strictObject({
  name: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9._ -]{1,64}$/, 'use 1 to 64 of A-Z, a-z, 0-9, space, dot, dash, underscore'),
});
const publishBody = z.strictObject({ ipnsName: z.string().min(1).max(200), cid: z.string().min(1).max(200) });
const dnsLinkQuery = z.object({
  domain: z.string().min(1).max(253),
  verify: z.enum(['true', 'false']).optional(),
});

export function ipnsRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use('/ipns', guard);

  resource(router, '/ipns/keys', {
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        if (req.body === undefined) throw new InvalidInput('a JSON body with `name` is required');
        const { name } = parse(keyBody, req.body);
        res.status(201).json(await createIpnsName(deps, caller(req), name));
      },
    ],
    get: async (req, res) => {
      res.json(await listIpnsNames(deps, caller(req).user._id));
    },
  });

  resource(router, '/ipns/keys/:ipnsName', {
    get: async (req, res) => {
      res.json(await getIpnsName(deps, caller(req).user._id, String(req.params.ipnsName)));
    },
    delete: async (req, res) => {
      await deleteIpnsName(deps, caller(req).user._id, String(req.params.ipnsName));
      res.json({ success: true });
    },
  });

  resource(router, '/ipns/keys/:ipnsName/dnslink', {
    get: async (req, res) => {
      const q = parse(dnsLinkQuery, req.query);
      res.json(await dnsLinkFor(deps, caller(req).user._id, String(req.params.ipnsName), q.domain, q.verify === 'true'));
    },
  });

  resource(router, '/ipns/publish', {
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        if (req.body === undefined) throw new InvalidInput('a JSON body with `ipnsName` and `cid` is required');
        const body = parse(publishBody, req.body);
        const published = await publishIpns(deps, caller(req), body.ipnsName, body.cid);
        res.json({
          ipnsName: published.ipnsName,
          cid: published.cid,
          published: true,
          sequence: published.sequence,
          publishedAt: published.publishedAt,
        });
      },
    ],
  });

  resource(router, '/ipns/resolve/:ipnsName', {
    get: async (req, res) => {
      res.json(await resolveIpns(deps, String(req.params.ipnsName)));
    },
  });

  return router;
}
