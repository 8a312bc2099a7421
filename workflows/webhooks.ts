// An endpoint's delivery job (contract: infra/temporal/contracts/webhooks.ts): rounds of
// sending (activities/webhooks.ts) for the endpoint's whole life. Between rounds it sleeps on a
// durable timer until the next retry is due, or until an event wakes it; with nothing pending it
// still looks every WEBHOOK_IDLE_LOOK_MS, for events whose wake-up was lost. Its state is the
// deliveries in MongoDB, so a worker killed mid-round loses nothing: the round runs again and
// sends what it had not recorded as delivered (at least once, same `webhook-id`).
import {
  condition,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  WAKE_SIGNAL,
  WEBHOOK_IDLE_LOOK_MS,
  WEBHOOK_ROUNDS_PER_RUN,
  type WebhookRound,
  type WebhookWorkflow,
} from '../infra/temporal/contracts/webhooks.js';

const wakeSignal = defineSignal(WAKE_SIGNAL);

/** A round sends one attempt at a time, each within 10 s, and heartbeats every 2 s. */
const { sendWebhookRound } = proxyActivities<Activities>({
  startToCloseTimeout: '2m',
  heartbeatTimeout: '15s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
});

export const webhookWorkflow: WebhookWorkflow = async (input) => {
  let woken = false;
  setHandler(wakeSignal, () => void (woken = true));
  // A round lingers unless the job woke by itself (a retry's time, or its look for lost
  // wake-ups): the run's first round follows an event or the previous run.
  let linger: boolean = true;
  for (let round = 0; round < WEBHOOK_ROUNDS_PER_RUN; round++) {
    woken = false;
    const result: WebhookRound = await sendWebhookRound({ ...input, linger });
    if (result.state === 'stopped') return;
    linger = true;
    if (result.state === 'more') continue;
    const wait: number =
      result.nextAttemptAt === null ? WEBHOOK_IDLE_LOOK_MS : Math.max(0, Math.min(WEBHOOK_IDLE_LOOK_MS, result.nextAttemptAt - Date.now()));
    if (wait > 0) linger = await condition(() => woken, wait);
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await continueAsNew<WebhookWorkflow>(input);
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// It lives as long as its webhook: pinned, no upgrade would ever retire a version.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookWorkflow);
