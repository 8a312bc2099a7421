// The activity of an endpoint's delivery job (workflows/webhooks.ts): one round sends what is
// due, in event order, and says when the next attempt is due.
//
// Order: a subject's events (one pin request, one file) are sent in the order they happened; a
// delivery that fails holds back the later ones of its subject until it is delivered or given
// up, while other subjects go on. A delivery is retried on WEBHOOK_RETRY_FRACTIONS of the retry
// period (about three days) with the same `webhook-id`, then given up (`failed`, and
// redeliverable). An endpoint that has failed for the whole period is paused, and a notice is
// put in its delivery log.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  WEBHOOK_ATTEMPTS_KEPT,
  WEBHOOK_LOG_RETENTION_MS,
  WEBHOOK_POLL_MS,
  WEBHOOK_RETRY_FRACTIONS,
  WEBHOOK_ROUND_DELIVERIES,
  WEBHOOK_ROUND_LINGER_MS,
  WEBHOOK_ROUND_MS,
} from '../infra/constants.js';
import type { AttemptWrite, DeliveryRecord, WebhookRecord } from '../infra/db/webhooks.js';
import { unseal } from '../infra/secrets.js';
import type { WebhookRound, WebhookRoundInput } from '../infra/temporal/contracts/webhooks.js';
import { DISABLED_NOTICE_TYPE, newDelivery } from '../core/webhook-events.js';
import { sendWebhook } from '../infra/webhook-send.js';
import { webhookBody } from '../core/webhook-payload.js';
import type { ActivityDeps } from './deps.js';
import { heartbeating } from './heartbeat.js';

/** The wait after the `n`th failed attempt of a try (n ≥ 1). */
export function retryWait(n: number, periodMs: number): number {
  const fraction = WEBHOOK_RETRY_FRACTIONS[Math.min(n, WEBHOOK_RETRY_FRACTIONS.length) - 1]!;
  return Math.max(1, Math.round(fraction * periodMs));
}

export function createWebhookActivities(deps: ActivityDeps) {
  const { db, config } = deps;
  const periodMs = config.webhooks.retryPeriodMs;

  /** Pauses the endpoint and tells the account in its log (once: whoever paused it first). */
  async function pause(webhook: WebhookRecord, now: number): Promise<void> {
    const period = periodMs >= 7_200_000 ? `${Math.round(periodMs / 3_600_000)} hours` : `${Math.round(periodMs / 1000)} s`;
    const reason = `every delivery failed for ${period}; enable the webhook again (PUT with enabled: true) once the endpoint answers`;
    if (!(await db.webhooks.disable(webhook._id, reason))) return;
    const notice = newDelivery(
      webhook.userId,
      webhook._id,
      `msg_disabled_${webhook._id}_${now}`,
      { type: DISABLED_NOTICE_TYPE, subject: `webhook:${webhook._id}`, data: { webhookId: webhook._id, reason } },
      now,
      now * 1000,
    );
    await db.webhooks.addDeliveries([{ ...notice, state: 'failed' }]);
  }

  /** One attempt of `delivery`: delivered, or when it is tried next (null: given up), and the
   * write that keeps it in the log (the round writes its attempts together). */
  async function attempt(webhook: WebhookRecord, secret: string, delivery: DeliveryRecord) {
    const result = await sendWebhook({
      url: webhook.url,
      secret,
      eventId: delivery.eventId,
      body: webhookBody(delivery),
      allowPrivate: config.webhooks.allowPrivate,
    });
    const at = Date.now();
    const firstAttemptAt = delivery.firstAttemptAt ?? at;
    const record = { at, statusCode: result.statusCode, latencyMs: result.latencyMs, error: result.error, response: result.response };
    if (result.ok) {
      const write: AttemptWrite = { id: delivery._id, attempt: record, set: { state: 'delivered', nextAttemptAt: at, firstAttemptAt } };
      return { delivered: true, next: null, at, firstAttemptAt, write };
    }
    const tries = delivery.attempts.filter((a) => a.at >= firstAttemptAt).length + 1;
    const next = at + retryWait(tries, periodMs);
    const state = next > firstAttemptAt + periodMs ? 'failed' : 'pending';
    const write: AttemptWrite = { id: delivery._id, attempt: record, set: { state, nextAttemptAt: next, firstAttemptAt } };
    return { delivered: false, next: state === 'pending' ? next : null, at, firstAttemptAt, write };
  }

  /** One pass over the endpoint's pending deliveries in event order: sends what is due. */
  async function sendDue(
    webhook: WebhookRecord,
    secret: string,
    started: number,
  ): Promise<WebhookRound & { attempted: number; failingSince: number | null }> {
    const pending = await db.webhooks.pending(webhook._id, WEBHOOK_ROUND_DELIVERIES);
    const held = new Set<string>();
    const writes: AttemptWrite[] = [];
    let nextAttemptAt: number | null = null;
    let failingSince = webhook.failingSince;
    let attempted = 0;
    const done = async (round: WebhookRound) => {
      await db.webhooks.attempted(writes, WEBHOOK_ATTEMPTS_KEPT);
      return { ...round, attempted, failingSince };
    };
    for (const delivery of pending) {
      if (held.has(delivery.subject)) continue;
      const now = Date.now();
      if (now - started > WEBHOOK_ROUND_MS) return done({ state: 'more' });
      if (delivery.nextAttemptAt > now) {
        held.add(delivery.subject);
        nextAttemptAt = Math.min(nextAttemptAt ?? Infinity, delivery.nextAttemptAt);
        continue;
      }
      attempted++;
      const outcome = await attempt(webhook, secret, delivery);
      writes.push(outcome.write);
      if (outcome.delivered) {
        if (failingSince !== null) await db.webhooks.answering(webhook._id);
        failingSince = null;
        continue;
      }
      const { at } = outcome;
      if (failingSince === null) await db.webhooks.failing(webhook._id, at);
      failingSince ??= at;
      // Failing for the whole period: a delivery given up with nothing delivered since its
      // first attempt, or failures for longer than the period.
      const givenUp = outcome.next === null;
      if ((givenUp && failingSince <= outcome.firstAttemptAt) || at - failingSince >= periodMs) {
        await db.webhooks.attempted(writes.splice(0), WEBHOOK_ATTEMPTS_KEPT);
        await pause(webhook, at);
        return done({ state: 'stopped' });
      }
      // Given up: the subject's later events may go now, from the next pass.
      if (givenUp) return done({ state: 'more' });
      held.add(delivery.subject);
      nextAttemptAt = Math.min(nextAttemptAt ?? Infinity, outcome.next!);
    }
    // A full page may have more behind it; a page of deliveries all held back waits for them.
    if (pending.length === WEBHOOK_ROUND_DELIVERIES && attempted > 0) return done({ state: 'more' });
    return done({ state: 'waiting', nextAttemptAt });
  }

  const roundOf = (r: WebhookRound): WebhookRound =>
    r.state === 'waiting' ? { state: 'waiting', nextAttemptAt: r.nextAttemptAt } : { state: r.state };

  /** When this process last dropped an endpoint's old log entries: once an hour is enough. */
  const pruned = new Map<string, number>();

  async function round({ webhookId, linger }: WebhookRoundInput): Promise<WebhookRound> {
    const webhook = await db.webhooks.byId(webhookId);
    if (!webhook || !webhook.enabled) return { state: 'stopped' };
    const secret = unseal(config.masterKey, webhook.secretSealed);
    const started = Date.now();
    if ((pruned.get(webhookId) ?? 0) < started - 3_600_000) {
      pruned.set(webhookId, started);
      await db.webhooks.prune(webhookId, started - WEBHOOK_LOG_RETENTION_MS);
    }
    let failingSince = webhook.failingSince;
    for (;;) {
      const passStarted = Date.now();
      const pass = await sendDue({ ...webhook, failingSince }, secret, started);
      failingSince = pass.failingSince;
      if (pass.state === 'stopped') return roundOf(pass);
      const timeLeft = Date.now() - started < WEBHOOK_ROUND_MS;
      if (pass.state === 'more') {
        if (timeLeft) continue;
        return { state: 'more' };
      }
      // Nothing was due: the job sleeps until the next retry, or until an event wakes it. A
      // round an event woke first looks until WEBHOOK_ROUND_LINGER_MS from its start: its
      // last look begins after that, so it sees every event recorded before the recorder's
      // signal plus that time (what the recorder counts on to send no other: `wakeFor`).
      if (pass.attempted === 0 && !(linger && passStarted - started < WEBHOOK_ROUND_LINGER_MS)) return roundOf(pass);
      // Events are arriving: look again shortly, in this round, rather than a round each
      // (a round costs Temporal and the worker several milliseconds: npm run bench).
      if (!timeLeft) return { state: 'more' };
      await sleep(WEBHOOK_POLL_MS);
    }
  }

  return {
    /** A round heartbeats on a clock (activities/heartbeat.ts), as the other long steps do, not
     * per delivery: a heartbeat crosses into the SDK's native core, a fifth of the worker's CPU
     * in a profile of uploads with a webhook (npm run bench -- --webhooks; unprofiled runs show
     * no difference the noise lets through). */
    sendWebhookRound: (input: WebhookRoundInput): Promise<WebhookRound> => heartbeating(() => round(input)),
  };
}
