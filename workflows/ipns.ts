// An IPNS name's job (contract: infra/temporal/contracts/ipns.ts): one workflow per name for
// its whole life, republishing the name's current record on a timer. Chosen over a Temporal
// Schedule per name because the job keeps a status that a query reads (failing since when,
// paused), takes pause, resume, republish-now and delete as signals, and retries a failed
// republish sooner than the interval. Publishes are the API's: it raises the sequence in
// MongoDB and stores the record itself, and a republish reads the current record there.
// The workflow continues as new every REPUBLISHES_PER_RUN rounds so its history stays short.
import {
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  DELETE_SIGNAL,
  PAUSE_SIGNAL,
  REPUBLISH_RETRY_MS,
  REPUBLISH_SIGNAL,
  REPUBLISHES_PER_RUN,
  RESUME_SIGNAL,
  STATUS_QUERY,
  type IpnsJobStatus,
  type IpnsNameWorkflow,
} from '../infra/temporal/contracts/ipns.js';

const republishSignal = defineSignal(REPUBLISH_SIGNAL);
const pauseSignal = defineSignal(PAUSE_SIGNAL);
const resumeSignal = defineSignal(RESUME_SIGNAL);
const deleteSignal = defineSignal(DELETE_SIGNAL);
const statusQuery = defineQuery<IpnsJobStatus>(STATUS_QUERY);

/** A republish reports its own failure (it never throws for Kubo's), so it is not retried here. */
const { republishIpnsName, announceRepublishFailing } = proxyActivities<Activities>({
  startToCloseTimeout: '1m',
  retry: { maximumAttempts: 3 },
});

export const ipnsNameWorkflow: IpnsNameWorkflow = async (input) => {
  const { ipnsName } = input;
  const status: IpnsJobStatus = input.carried ?? {
    paused: false,
    nextRepublishAt: null,
    lastRepublishAt: null,
    failingSince: null,
    republishes: 0,
  };
  let deleted = false;
  let triggered = false;
  setHandler(republishSignal, () => void (triggered = true));
  setHandler(pauseSignal, () => void (status.paused = true));
  setHandler(resumeSignal, () => void (status.paused = false));
  setHandler(deleteSignal, () => void (deleted = true));
  setHandler(statusQuery, () => status);

  for (let round = 0; !deleted && round < REPUBLISHES_PER_RUN;) {
    const wait = status.failingSince === null ? input.republishEveryMs : Math.min(input.republishEveryMs, REPUBLISH_RETRY_MS);
    status.nextRepublishAt = status.paused ? null : Date.now() + wait;
    await condition(() => deleted || triggered || status.paused, status.paused ? undefined : wait);
    if (deleted) break;
    if (status.paused && !triggered) {
      await condition(() => deleted || triggered || !status.paused);
      if (!triggered) continue;
    }
    // Here the timer ran out, or a republish was asked for.
    triggered = false;
    const outcome = await republishIpnsName({ ipnsName });
    if (outcome === 'gone') break;
    status.lastRepublishAt = Date.now();
    status.republishes++;
    const began = outcome === 'failed' && status.failingSince === null;
    status.failingSince = outcome === 'failed' ? (status.failingSince ?? Date.now()) : null;
    // Runs recorded before webhooks announce nothing when replayed (Temporal's patching).
    if (began && patched('webhook-events')) {
      await announceRepublishFailing({ userId: input.userId, ipnsName, failingSince: status.failingSince! }).catch(() => undefined);
    }
    round++;
    if (workflowInfo().continueAsNewSuggested) break;
  }
  if (!deleted) await continueAsNew<IpnsNameWorkflow>({ ...input, carried: status });
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// It lives as long as its name: pinned, no upgrade would ever retire a version.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, ipnsNameWorkflow);
