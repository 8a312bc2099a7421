// Recording an event for an account's webhooks: one delivery per enabled endpoint that takes
// the event's type (infra/db/webhooks.ts), then the endpoints' jobs woken. Called where the
// change happened (the API's use-cases, the worker's activities) after it is written.
//
// Cost when nobody listens: the user record (read by every request already, remembered for
// AUTH_MEMORY_MS) lists the event types any of the user's endpoints ever took
// (`webhookEvents`), so an event nobody can want costs no read. The list only grows: keeping
// it exact would race an endpoint created beside one deleted; a stale entry costs one indexed
// read that finds no endpoint.
import {
  WEBHOOK_DELIVERY_ID_PREFIX,
  WEBHOOK_EVENT_ID_PREFIX,
  WEBHOOK_POLL_MS,
  WEBHOOK_ROUND_LINGER_MS,
  WEBHOOK_WAKE_DELAY_MS,
} from '../infra/constants.js';
import type { Database } from '../infra/db/index.js';
import type { DeliveryRecord } from '../infra/db/webhooks.js';
import type { Logger } from '../infra/logger.js';
import { hashedBase62, randomBase62 } from '../infra/secrets.js';
import { WAKE_SIGNAL, webhookJob } from '../infra/temporal/contracts/webhooks.js';
import type { Jobs } from '../infra/temporal/jobs.js';

export const WEBHOOK_EVENT_TYPES = [
  'pin.queued',
  'pin.pinned',
  'pin.failed',
  'upload.created',
  'file.deleted',
  'snapshot.completed',
  'snapshot.failed',
  'ipns.published',
  'ipns.republish_failing',
  's3.object.created',
  'quota.near',
  'quota.reached',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** Sent by POST /webhooks/:id/test to that endpoint only. */
export const TEST_EVENT_TYPE = 'webhook.test';
/** Not sent: the notice in an endpoint's delivery log that the service paused it. */
export const DISABLED_NOTICE_TYPE = 'webhook.disabled';

export interface WebhookEvent {
  type: WebhookEventType | typeof TEST_EVENT_TYPE | typeof DISABLED_NOTICE_TYPE;
  /** What it is about (`pin:<requestId>`, `file:<id>`): one subject's events are sent in order. */
  subject: string;
  /** The payload's `data`: the resource as the API shows it. */
  data: Record<string, unknown>;
  /** Set when the same event may be recorded again (an activity retried): recorded once. */
  id?: string;
}

/** A pin request's event; the request's events are one subject (its record, over retries). */
export const pinEvent = (type: 'pin.queued' | 'pin.pinned' | 'pin.failed', pin: { _id: string; requestId: string }): WebhookEvent => ({
  type,
  subject: `pin:${pin._id}`,
  data: { pin },
  // The worker's events may be recorded again by a retried activity: once per request.
  ...(type === 'pin.queued' ? {} : { id: `msg_${type.slice(4)}_${pin.requestId}` }),
});

/** Whether any webhook of the user may take `type` (false: recording it would find no endpoint). */
export const wants = (user: { webhookEvents?: string[] } | null | undefined, type: string): boolean =>
  user?.webhookEvents?.includes(type) ?? false;

/** A file's event: the file as the API shows it, whose links need the account's gateway. */
export const fileEvent = (type: 'upload.created' | 'file.deleted', file: { _id: string }, gatewayUrl: string): WebhookEvent => ({
  type,
  subject: `file:${file._id}`,
  data: { file, gatewayUrl },
});

export interface EventDeps {
  db: Pick<Database, 'users' | 'webhooks'>;
  jobs: Jobs;
  logger?: Pick<Logger, 'warn'>;
}

/** Events of one millisecond in this process keep their order (a delivery's `seq`). */
let lastMs = 0;
let inMs = 0;
function nextSeq(now: number): number {
  if (now > lastMs) [lastMs, inMs] = [now, 0];
  else inMs = Math.min(inMs + 1, 999);
  return lastMs * 1000 + inMs;
}

/**
 * A delivery's ID: a function of its endpoint and event, so an event recorded again (a retried
 * activity) names the delivery already there and its insert is refused as a duplicate `_id`,
 * with no other unique index to keep (each costs every insert its upkeep). Deliveries recorded
 * before IDs were derived keep their random ones: such an event recorded again across the
 * upgrade would be delivered twice with one `webhook-id`, which at-least-once allows.
 */
export const deliveryId = (webhookId: string, eventId: string): string =>
  WEBHOOK_DELIVERY_ID_PREFIX + hashedBase62(`delivery:${webhookId}:${eventId}`, 20);

/** The delivery of `event` to one endpoint, pending. */
export function newDelivery(
  userId: string,
  webhookId: string,
  eventId: string,
  event: WebhookEvent,
  now: number,
  seq: number,
): DeliveryRecord {
  return {
    _id: deliveryId(webhookId, eventId),
    webhookId,
    userId,
    eventId,
    type: event.type,
    subject: event.subject,
    data: event.data,
    occurredAt: now,
    seq,
    state: 'pending',
    nextAttemptAt: now,
    firstAttemptAt: null,
    attempts: [],
    createdAt: now,
  };
}

/**
 * Records `event` for every endpoint of the user that takes it, and wakes their jobs. Never
 * throws: the change it reports has happened, and failing the request now would tell the
 * client otherwise; a failure is logged (docs/limits.md).
 */
export async function recordEvent(deps: EventDeps, userId: string, event: WebhookEvent): Promise<void> {
  try {
    if (!wants(await deps.db.users.get(userId), event.type)) return;
    const endpoints = await deps.db.webhooks.subscribed(userId, event.type);
    if (endpoints.length === 0) return;
    await recordFor(
      deps,
      userId,
      endpoints.map((e) => e._id),
      event,
    );
  } catch (err) {
    deps.logger?.warn({ err, userId, type: event.type }, 'a webhook event could not be recorded');
  }
}

/** Records `event` for the named endpoints (the test event: one endpoint) and wakes them. */
export async function recordFor(deps: EventDeps, userId: string, webhookIds: string[], event: WebhookEvent): Promise<DeliveryRecord[]> {
  const now = Date.now();
  const seq = nextSeq(now);
  const eventId = event.id ?? WEBHOOK_EVENT_ID_PREFIX + randomBase62(22);
  const deliveries = webhookIds.map((id) => newDelivery(userId, id, eventId, event, now, seq));
  await deps.db.webhooks.addDeliveries(deliveries);
  for (const webhookId of webhookIds) wakeFor(deps.jobs, userId, webhookId);
  return deliveries;
}

/**
 * Until when (ms) a round of each endpoint's job is sure to look again, from a signal this
 * process sent: a round woken by an event looks until WEBHOOK_ROUND_LINGER_MS from its start
 * (activities/webhooks.ts), and its start comes after the signal; a poll's length is kept as a
 * margin. An event recorded before then needs no signal of its own, so a steady stream of events
 * costs about one signal a second per endpoint and process, not one per WEBHOOK_WAKE_DELAY_MS.
 */
const looking = new Map<string, number>();

/** Wakes the job for events just recorded, unless a round is sure to see them (`looking`). */
function wakeFor(jobs: Jobs, userId: string, webhookId: string): void {
  if ((looking.get(webhookId) ?? 0) > Date.now()) return;
  wake(jobs, userId, webhookId);
}

/**
 * Wakes an endpoint's job, in the background, WEBHOOK_WAKE_DELAY_MS from the first event that
 * asks: the events of a burst share one signal and one round, and while a signal is on its way
 * the next events ask for no other, so a stream of events costs a few signals a second, not one
 * each. A job that is in a round when the signal comes runs another after it (the workflow
 * keeps the signal), so an event recorded as a round ends is not left behind. A lost wake-up
 * (Temporal away, the process gone) delays the deliveries until the job looks by itself (every
 * 5 minutes: workflows/webhooks.ts); they are recorded, so none is lost.
 */
const waking = new Set<string>();
export function wake(jobs: Jobs, userId: string, webhookId: string): void {
  if (waking.has(webhookId)) return;
  waking.add(webhookId);
  setTimeout(() => {
    waking.delete(webhookId);
    // Counted on from the moment it is sent (the events recorded while it travels need none of
    // their own), and forgotten if it fails: those are then as a lost wake-up's events.
    const until = Date.now() + WEBHOOK_ROUND_LINGER_MS - WEBHOOK_POLL_MS;
    const forget = () => looking.get(webhookId) === until && looking.delete(webhookId);
    looking.set(webhookId, until);
    setTimeout(forget, WEBHOOK_ROUND_LINGER_MS).unref();
    jobs.signalWithStart(webhookJob, { userId, webhookId }, WAKE_SIGNAL, []).catch(forget);
  }, WEBHOOK_WAKE_DELAY_MS).unref();
}
