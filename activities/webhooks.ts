// The activity of an endpoint's delivery job (workflows/webhooks.ts): one round sends what is
// due, in event order, and says when the next attempt is due.
//
// Order: a subject's events (one pin request, one file) are sent in the order they happened; a
// delivery that fails holds back the later ones of its subject until it is delivered or given
// up, while other subjects go on. A delivery is retried on WEBHOOK_RETRY_FRACTIONS of the retry
// period (about three days) with the same `webhook-id`, then given up (`failed`, and
// redeliverable). An endpoint that has failed for the whole period is paused, and a notice is
// put in its delivery log.
import { Context } from '@temporalio/activity';
import {
  WEBHOOK_ATTEMPTS_KEPT,
  WEBHOOK_LOG_RETENTION_MS,
  WEBHOOK_RETRY_FRACTIONS,
  WEBHOOK_ROUND_DELIVERIES,
  WEBHOOK_ROUND_MS,
} from '../infra/constants.js';
import type { DeliveryRecord, WebhookRecord } from '../infra/db/webhooks.js';
import { unseal } from '../infra/secrets.js';
import type { WebhookJobInput, WebhookRound } from '../infra/temporal/contracts/webhooks.js';
import { DISABLED_NOTICE_TYPE, newDelivery } from '../infra/webhooks/events.js';
import { sendWebhook } from '../infra/webhooks/send.js';
import { webhookBody } from '../api/webhooks/payload.js';
import type { ActivityDeps } from './deps.js';

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
    const reason = `every delivery failed for ${Math.round(periodMs / 60_000)} minutes; enable the webhook again (PUT with enabled: true) once the endpoint answers`;
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

  /** One attempt of `delivery`, kept in its log: delivered, or when it is tried next (null: given up). */
  async function attempt(
    webhook: WebhookRecord,
    secret: string,
    delivery: DeliveryRecord,
  ): Promise<{ delivered: boolean; next: number | null; at: number; firstAttemptAt: number }> {
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
      await db.webhooks.attempted(delivery._id, record, { state: 'delivered', nextAttemptAt: at, firstAttemptAt }, WEBHOOK_ATTEMPTS_KEPT);
      return { delivered: true, next: null, at, firstAttemptAt };
    }
    const tries = delivery.attempts.filter((a) => a.at >= firstAttemptAt).length + 1;
    const next = at + retryWait(tries, periodMs);
    const state = next > firstAttemptAt + periodMs ? 'failed' : 'pending';
    await db.webhooks.attempted(delivery._id, record, { state, nextAttemptAt: next, firstAttemptAt }, WEBHOOK_ATTEMPTS_KEPT);
    return { delivered: false, next: state === 'pending' ? next : null, at, firstAttemptAt };
  }

  return {
    async sendWebhookRound({ webhookId }: WebhookJobInput): Promise<WebhookRound> {
      const webhook = await db.webhooks.byId(webhookId);
      if (!webhook || !webhook.enabled) return { state: 'stopped' };
      const secret = unseal(config.masterKey, webhook.secretSealed);
      const started = Date.now();
      await db.webhooks.prune(webhookId, started - WEBHOOK_LOG_RETENTION_MS);
      const pending = await db.webhooks.pending(webhookId, WEBHOOK_ROUND_DELIVERIES);
      const held = new Set<string>();
      let nextAttemptAt: number | null = null;
      let failingSince = webhook.failingSince;
      let attempted = 0;
      for (const delivery of pending) {
        if (held.has(delivery.subject)) continue;
        const now = Date.now();
        if (now - started > WEBHOOK_ROUND_MS) return { state: 'more' };
        if (delivery.nextAttemptAt > now) {
          held.add(delivery.subject);
          nextAttemptAt = Math.min(nextAttemptAt ?? Infinity, delivery.nextAttemptAt);
          continue;
        }
        Context.current().heartbeat();
        attempted++;
        const outcome = await attempt(webhook, secret, delivery);
        if (outcome.delivered) {
          if (failingSince !== null) await db.webhooks.answering(webhookId);
          failingSince = null;
          continue;
        }
        const { at } = outcome;
        if (failingSince === null) await db.webhooks.failing(webhookId, at);
        failingSince ??= at;
        // Failing for the whole period: a delivery given up with nothing delivered since its
        // first attempt, or failures for longer than the period.
        const givenUp = outcome.next === null;
        if ((givenUp && failingSince <= outcome.firstAttemptAt) || at - failingSince >= periodMs) {
          await pause(webhook, at);
          return { state: 'stopped' };
        }
        // Given up: the subject's later events may go now, from the next round.
        if (givenUp) return { state: 'more' };
        held.add(delivery.subject);
        nextAttemptAt = Math.min(nextAttemptAt ?? Infinity, outcome.next!);
      }
      // A full page may have more behind it; a page of deliveries all held back waits for them.
      if (pending.length === WEBHOOK_ROUND_DELIVERIES && attempted > 0) return { state: 'more' };
      return { state: 'waiting', nextAttemptAt };
    },
  };
}
