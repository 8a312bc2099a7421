// An IPNS name's job (contract: infra/temporal/contracts/ipns.ts): one workflow per name for
// its whole life. Chosen over a Temporal Schedule per name because publishing must go
// through the same place as republishing: one workflow orders them (a republish never
// stores an older record over a newer one), answers a publish as an update once the record
// is stored, and keeps the status a query reads. A timer loop republishes; the workflow
// continues as new every REPUBLISHES_PER_RUN rounds so its history stays short.
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  DELETE_SIGNAL,
  PAUSE_SIGNAL,
  PUBLISH_UPDATE,
  REPUBLISH_RETRY_MS,
  REPUBLISH_SIGNAL,
  REPUBLISHES_PER_RUN,
  RESUME_SIGNAL,
  STATUS_QUERY,
  type IpnsJobStatus,
  type IpnsNameWorkflow,
  type IpnsPublished,
} from '../infra/temporal/contracts/ipns.js';

const publishUpdate = defineUpdate<IpnsPublished, [{ cid: string }]>(PUBLISH_UPDATE);
const republishSignal = defineSignal(REPUBLISH_SIGNAL);
const pauseSignal = defineSignal(PAUSE_SIGNAL);
const resumeSignal = defineSignal(RESUME_SIGNAL);
const deleteSignal = defineSignal(DELETE_SIGNAL);
const statusQuery = defineQuery<IpnsJobStatus>(STATUS_QUERY);

const { advanceIpnsName } = proxyLocalActivities<Activities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 5 } });
/** Storing a published record: a few tries, then the publish answers its failure (and the
 * record is stored by the next republish, as it is the name's current one). */
const { storeIpnsRecord } = proxyActivities<Activities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '500ms', maximumAttempts: 4 },
});
/** A republish reports its own failure (it never throws for Kubo's), so it is not retried here. */
const { republishIpnsName } = proxyActivities<Activities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 3 } });

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
  // One record store at a time: a publish and a republish never race to Kubo.
  let busy = false;
  const exclusive = async <T>(work: () => Promise<T>): Promise<T> => {
    await condition(() => !busy);
    busy = true;
    try {
      return await work();
    } finally {
      busy = false;
    }
  };

  setHandler(
    publishUpdate,
    ({ cid }) =>
      exclusive(async () => {
        const advanced = await advanceIpnsName({ ipnsName, cid });
        await storeIpnsRecord({ ipnsName, cid: advanced.cid, sequence: advanced.sequence });
        return advanced;
      }),
    {
      validator: (_: { cid: string }) => {
        if (deleted) throw new Error('the name is deleted');
      },
    },
  );
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
    const outcome = await exclusive(() => republishIpnsName({ ipnsName }));
    if (outcome === 'gone') break;
    status.lastRepublishAt = Date.now();
    status.republishes++;
    status.failingSince = outcome === 'failed' ? (status.failingSince ?? Date.now()) : null;
    round++;
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await condition(allHandlersFinished);
  if (!deleted) await continueAsNew<IpnsNameWorkflow>({ ...input, carried: status });
};
