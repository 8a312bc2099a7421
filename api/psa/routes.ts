// The IPFS Pinning Service API v1.0.0 under /psa (docs/api/contract.md, "Pinning Service API"), so that
// `ipfs pin remote service add NAME http://HOST/psa KEY` works. One more surface over the pin
// use-cases (core/pins.ts): the same requests, holds and workflows as /pin, in the
// spec's shapes (shapes.ts). Authentication and the rate limit are the REST guard's (Bearer
// API keys); failures leave as the spec's Failure, which is the service's error shape, with
// one mapping of the spec's own: a plan limit is 409 (the spec's INSUFFICIENT_FUNDS case).
import { Router, type ErrorRequestHandler } from 'express';
import { HttpError } from '../rest/errors.js';
import { caller } from '../rest/http/auth.js';
import { resource, type RouterOptions } from '../rest/http/routing.js';
import { jsonBody, parse } from '../rest/http/validate.js';
import { cidInput } from '../../core/content.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { InvalidInput, LimitReached } from '../../core/errors.js';
import {
  deletePinRequest,
  findPins,
  getPinRequest,
  pinDelegates,
  replacePinRequest,
  requestPin,
  type PinRequest,
} from '../../core/pins.js';
import { listQuery, pinBody, pinStatus } from './shapes.js';

const toRequest = (body: unknown): PinRequest => {
  if (body === undefined) throw new InvalidInput('a JSON body with `cid` is required', 'BAD_REQUEST');
  const pin = parse(pinBody, body);
  return { cid: cidInput(pin.cid), name: pin.name || undefined, origins: pin.origins, metadata: pin.meta };
};

const limitsAsConflict: ErrorRequestHandler = (err, _req, _res, next) => {
  next(err instanceof LimitReached ? new HttpError(409, err.reason, err.details) : err);
};

export function psaRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  const delegates = pinDelegates(deps);
  router.use('/pins', guard);

  resource(router, '/pins', {
    get: async (req, res) => {
      const { query, limit, impossible } = listQuery(new URL(req.originalUrl, 'http://psa').searchParams);
      const found = impossible ? { count: 0, results: [] } : await findPins(deps, caller(req).user._id, query, limit);
      const addresses = await delegates();
      res.json({ count: found.count, results: found.results.map((p) => pinStatus(p, addresses)) });
    },
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const pin = await requestPin(deps, caller(req), toRequest(req.body));
        res.status(202).json(pinStatus(pin, await delegates()));
      },
    ],
  });

  resource(router, '/pins/:requestid', {
    get: async (req, res) => {
      const pin = await getPinRequest(deps, caller(req).user._id, String(req.params.requestid));
      res.json(pinStatus(pin, await delegates()));
    },
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        const pin = await replacePinRequest(deps, caller(req), String(req.params.requestid), toRequest(req.body));
        res.status(202).json(pinStatus(pin, await delegates()));
      },
    ],
    delete: async (req, res) => {
      await deletePinRequest(deps, caller(req).user._id, String(req.params.requestid));
      res.status(202).end();
    },
  });

  router.use(limitsAsConflict);
  return router;
}
