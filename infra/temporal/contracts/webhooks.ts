// Contract of an endpoint's delivery job (workflows/webhooks.ts): one long-lived workflow per
// endpoint, `webhook:<webhookId>`, found in the Temporal UI by `WebhookId` or the account's
// `UserId`. It sends the endpoint's pending deliveries in event order, waits out retries on
// durable timers, and ends when the endpoint is deleted or paused. Recording an event wakes it.
import type { JobContract } from './job.js';

export interface WebhookJobInput {
  userId: string;
  webhookId: string;
}

/** A round's input: the job's, and whether an event woke it (it then lingers: WEBHOOK_ROUND_LINGER_MS). */
export interface WebhookRoundInput extends WebhookJobInput {
  linger: boolean;
}

/** What a round of sending did (activities/webhooks.ts). */
export type WebhookRound =
  /** Deleted or paused: the job ends (enabling the endpoint starts it again). */
  | { state: 'stopped' }
  /** More is due now (the round ran out of time or of its page). */
  | { state: 'more' }
  /** Nothing is due before `nextAttemptAt` (null: nothing pending). */
  | { state: 'waiting'; nextAttemptAt: number | null };

export type WebhookWorkflow = (input: WebhookJobInput) => Promise<void>;

/** Signal, no arguments: events were recorded for the endpoint, or a delivery is to be sent again. */
export const WAKE_SIGNAL = 'wake';
/** A job with nothing pending looks again this often, for events whose wake-up was lost. */
export const WEBHOOK_IDLE_LOOK_MS = 5 * 60_000;
/** The job continues as new after this many rounds, keeping its history short. */
export const WEBHOOK_ROUNDS_PER_RUN = 200;

export const webhookJob: JobContract<WebhookJobInput, { webhookId: string }> = {
  workflowType: 'webhookWorkflow',
  taskQueue: (base) => `${base}-webhooks`,
  workflowId: ({ webhookId }) => `webhook:${webhookId}`,
  searchAttributes: ({ userId, webhookId }) => ({ UserId: userId, WebhookId: webhookId }),
};
