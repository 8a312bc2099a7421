// Webhooks: endpoints, their delivery logs, redelivery and a test event
// (core/webhooks.ts).
import { Router } from 'express';
import { z } from 'zod';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from '../../infra/constants.js';
import { WEBHOOK_EVENT_TYPES } from '../../core/webhook-events.js';
import type { UseCaseDeps } from '../../core/deps.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  redeliver,
  sendTestEvent,
  updateWebhook,
} from '../../core/webhooks.js';
import { caller } from './http/auth.js';
import { resource, type RouterOptions } from './http/routing.js';
import { jsonBody, parse } from './http/validate.js';

const fields = {
  url: z.string().min(1).max(2048),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).max(WEBHOOK_EVENT_TYPES.length),
  description: z.string().trim().max(255).nullable(),
  enabled: z.boolean(),
};
const createBody = z.strictObject({ ...fields, description: fields.description.optional(), enabled: fields.enabled.optional() });
const updateBody = z
  .strictObject(fields)
  .partial()
  .refine((b) => Object.keys(b).length > 0, 'give at least one of url, events, description, enabled');

const listQuery = z.strictObject({
  cursor: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_MAX_LIMIT).default(LIST_DEFAULT_LIMIT),
});

export function webhookRoutes(deps: UseCaseDeps, { guard, jsonLimit }: RouterOptions): Router {
  const router = Router();
  router.use('/webhooks', guard);
  const id = (params: Record<string, unknown>) => String(params.webhookId);

  resource(router, '/webhooks', {
    get: async (req, res) => {
      res.json(await listWebhooks(deps, caller(req), parse(listQuery, req.query, 'query')));
    },
    post: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        res.status(201).json(await createWebhook(deps, caller(req), parse(createBody, req.body ?? {})));
      },
    ],
  });

  resource(router, '/webhooks/:webhookId', {
    get: async (req, res) => {
      res.json(await getWebhook(deps, caller(req), id(req.params)));
    },
    put: [
      ...jsonBody(jsonLimit),
      async (req, res) => {
        res.json(await updateWebhook(deps, caller(req), id(req.params), parse(updateBody, req.body ?? {})));
      },
    ],
    delete: async (req, res) => {
      await deleteWebhook(deps, caller(req), id(req.params));
      res.json({ success: true, id: id(req.params) });
    },
  });

  resource(router, '/webhooks/:webhookId/deliveries', {
    get: async (req, res) => {
      res.json(await listDeliveries(deps, caller(req), id(req.params), parse(listQuery, req.query, 'query')));
    },
  });

  resource(router, '/webhooks/:webhookId/deliveries/:deliveryId/redeliver', {
    post: async (req, res) => {
      res.status(202).json(await redeliver(deps, caller(req), id(req.params), String(req.params.deliveryId)));
    },
  });

  resource(router, '/webhooks/:webhookId/test', {
    post: async (req, res) => {
      res.status(202).json(await sendTestEvent(deps, caller(req), id(req.params)));
    },
  });

  return router;
}
