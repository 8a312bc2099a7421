// Webhooks: an account's endpoints, which events they take, and their delivery logs. Delivery
// itself is each endpoint's job (workflows/webhooks.ts); events are recorded where they happen
// (core/webhook-events.ts).
//
// An endpoint must be HTTPS on a public address. Its host is checked here, when it is made or
// changed (a clear error at once), and again at every delivery, at connect time
// (infra/webhook-send.ts), so a name that later resolves elsewhere cannot pass. A name that
// does not resolve yet is accepted: delivery attempts will say why they fail.
import crypto from 'node:crypto';
import { WEBHOOK_ID_PREFIX } from '../infra/constants.js';
import type { DeliveryRecord, WebhookRecord } from '../infra/db/webhooks.js';
import { randomBase62, seal } from '../infra/secrets.js';
import { webhookJob } from '../infra/temporal/contracts/webhooks.js';
import { recordFor, TEST_EVENT_TYPE, wake, type WebhookEventType } from './webhook-events.js';
import { AddressRefused, checkHost } from '../infra/webhook-send.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { InvalidInput, LimitReached, NotFound } from './errors.js';
import { decodeCursor, toPage } from './pages.js';

type Deps = Pick<UseCaseDeps, 'db' | 'config' | 'jobs'>;

export interface WebhookInput {
  url: string;
  events: WebhookEventType[];
  description?: string | null;
  enabled?: boolean;
}

/** An endpoint as its owner sees it: never its secret (shown once, at creation). */
export const webhookInfo = (w: WebhookRecord) => ({
  id: w._id,
  url: w.url,
  events: w.events,
  description: w.description,
  enabled: w.enabled,
  disabledReason: w.disabledReason,
  failingSince: w.failingSince,
  createdAt: w.createdAt,
  updatedAt: w.updatedAt,
});

export const deliveryInfo = (d: Omit<DeliveryRecord, 'data'>) => ({
  id: d._id,
  eventId: d.eventId,
  eventType: d.type,
  state: d.state,
  createdAt: d.createdAt,
  nextAttemptAt: d.state === 'pending' ? d.nextAttemptAt : null,
  attempts: d.attempts,
});

const countKey = (userId: string) => `webhooks:${userId}`;

/** Starts the endpoint's job. The change is saved already, so Temporal being away does not fail
 * the request: the first event's wake-up starts the job (core/webhook-events.ts). */
async function startJob(deps: Deps, userId: string, webhookId: string): Promise<void> {
  await deps.jobs.start(webhookJob, { userId, webhookId }).catch(() => undefined);
}

/** The endpoint's address, checked (see the top of this file). */
async function checkUrl(deps: Deps, text: string): Promise<string> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidInput('url must be an absolute URL', 'INVALID_WEBHOOK_URL');
  }
  const { allowPrivate } = deps.config.webhooks;
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:'))
    throw new InvalidInput('url must be an https:// URL', 'INVALID_WEBHOOK_URL');
  if (url.username || url.password) throw new InvalidInput('url must not carry credentials', 'INVALID_WEBHOOK_URL');
  if (!allowPrivate) {
    try {
      await checkHost(url.hostname);
    } catch (err) {
      if (err instanceof AddressRefused) throw new InvalidInput(err.message, 'WEBHOOK_ADDRESS_REFUSED');
      // Not resolvable now (ENOTFOUND and the like): checked again at every delivery.
    }
  }
  return url.toString();
}

export async function createWebhook(deps: Deps, caller: Caller, input: WebhookInput) {
  const { user, plan } = caller;
  const url = await checkUrl(deps, input.url);
  if (!(await deps.db.counters.take(countKey(user._id), plan.webhooks)))
    throw new LimitReached('WEBHOOK_LIMIT', `your plan allows ${plan.webhooks} webhooks; delete one first`);
  try {
    const secret = `whsec_${crypto.randomBytes(24).toString('base64')}`;
    const now = Date.now();
    const record: WebhookRecord = {
      _id: WEBHOOK_ID_PREFIX + randomBase62(16),
      userId: user._id,
      url,
      events: [...new Set(input.events)],
      description: input.description ?? null,
      enabled: input.enabled ?? true,
      secretSealed: seal(deps.config.masterKey, secret),
      createdAt: now,
      updatedAt: now,
      failingSince: null,
      disabledReason: null,
    };
    // The endpoint first, then the user's list of wanted types: an event recorded between the
    // two is one this endpoint was not yet promised.
    await deps.db.webhooks.insert(record);
    await deps.db.users.addWebhookEvents(user._id, record.events);
    if (record.enabled) await startJob(deps, user._id, record._id);
    return { ...webhookInfo(record), secret };
  } catch (err) {
    await deps.db.counters.give(countKey(user._id));
    throw err;
  }
}

export async function listWebhooks(deps: Deps, caller: Caller, q: { limit: number; cursor?: string }) {
  const last = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.webhooks.page(caller.user._id, q.limit + 1, last);
  const page = toPage(rows, q.limit, (w) => ({ at: w.createdAt, id: w._id }));
  return { items: page.items.map(webhookInfo), nextCursor: page.nextCursor };
}

async function ownWebhook(deps: Deps, caller: Caller, id: string): Promise<WebhookRecord> {
  const webhook = await deps.db.webhooks.get(caller.user._id, id);
  if (!webhook) throw new NotFound('webhook');
  return webhook;
}

export async function getWebhook(deps: Deps, caller: Caller, id: string) {
  return webhookInfo(await ownWebhook(deps, caller, id));
}

/** Changes what is given; enabling a paused endpoint clears why it was paused and starts its job. */
export async function updateWebhook(deps: Deps, caller: Caller, id: string, input: Partial<WebhookInput>) {
  const set: Parameters<Deps['db']['webhooks']['update']>[2] = {};
  if (input.url !== undefined) set.url = await checkUrl(deps, input.url);
  if (input.events !== undefined) set.events = [...new Set(input.events)];
  if (input.description !== undefined) set.description = input.description;
  if (input.enabled !== undefined) set.enabled = input.enabled;
  if (input.enabled) set.disabledReason = null;
  if (set.events) await deps.db.users.addWebhookEvents(caller.user._id, set.events);
  const updated = await deps.db.webhooks.update(caller.user._id, id, set);
  if (!updated) throw new NotFound('webhook');
  if (updated.enabled) await startJob(deps, caller.user._id, id);
  return webhookInfo(updated);
}

/** Deletes the endpoint and its log; its job ends at its next round. */
export async function deleteWebhook(deps: Deps, caller: Caller, id: string): Promise<void> {
  if (!(await deps.db.webhooks.remove(caller.user._id, id))) throw new NotFound('webhook');
  await deps.db.counters.give(countKey(caller.user._id));
  wake(deps.jobs, caller.user._id, id);
}

export async function listDeliveries(deps: Deps, caller: Caller, id: string, q: { limit: number; cursor?: string }) {
  await ownWebhook(deps, caller, id);
  const last = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.webhooks.deliveries(caller.user._id, id, q.limit + 1, last);
  const page = toPage(rows, q.limit, (d) => ({ at: d.createdAt, id: d._id }));
  return { items: page.items.map(deliveryInfo), nextCursor: page.nextCursor };
}

/** Sends a delivery again: a new try, the same event ID. */
export async function redeliver(deps: Deps, caller: Caller, id: string, deliveryId: string) {
  const webhook = await ownWebhook(deps, caller, id);
  const delivery = await deps.db.webhooks.redeliver(caller.user._id, id, deliveryId);
  if (!delivery) throw new NotFound('delivery');
  if (webhook.enabled) wake(deps.jobs, caller.user._id, id);
  return deliveryInfo(delivery);
}

/** Records a `webhook.test` event for this endpoint only (sent even if it takes no such type). */
export async function sendTestEvent(deps: Deps, caller: Caller, id: string) {
  const webhook = await ownWebhook(deps, caller, id);
  const [delivery] = await recordFor(deps, caller.user._id, [webhook._id], {
    type: TEST_EVENT_TYPE,
    subject: `webhook:${webhook._id}`,
    data: { webhookId: webhook._id, message: 'a test event from Stupa' },
  });
  return deliveryInfo(delivery!);
}
