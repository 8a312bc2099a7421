// The Temporal workers of one process, with the connections they own: Temporal, MongoDB,
// Kubo and IPFS Cluster. Two task queues, both named by the contracts:
//   <TEMPORAL_TASK_QUEUE>        workflows and short activities;
//   <TEMPORAL_TASK_QUEUE>-waits  the long, heartbeating waits for content to be fetched
//                                (contracts/pins.ts `pinWait`), mostly asleep, so many at once;
//   <TEMPORAL_TASK_QUEUE>-webhooks  the endpoints' delivery jobs (contracts/webhooks.ts): slow
//                                receivers take their slots, not those of pins and uploads.
import { fileURLToPath } from 'node:url';
import { ScheduleAlreadyRunning, type Client } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { createClusterClient } from '../infra/ipfs/cluster.js';
import type { Config } from '../infra/config.js';
import { openDatabase } from '../infra/db/index.js';
import { createKubo } from '../infra/ipfs/kubo.js';
import type { Logger } from '../infra/logger.js';
import { createTemporal } from '../infra/temporal/client.js';
import { pinWait } from '../infra/temporal/contracts/pins.js';
import { webhookJob } from '../infra/temporal/contracts/webhooks.js';
import { auditJob } from '../infra/temporal/contracts/audit.js';
import { sweepJob } from '../infra/temporal/contracts/sweep.js';
import { multipartCleanupJob } from '../infra/temporal/contracts/multipart.js';
import { S3_MULTIPART_CLEANUP_EVERY } from '../infra/constants.js';
import { createJobs } from '../infra/temporal/jobs.js';
import { installRuntime } from './logging.js';

/** Development bundles the workflow sources once at start; production names a pre-built
 * bundle (npm run build writes dist/workflow-bundle.js) with WORKFLOW_BUNDLE. */
const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface RunningWorker {
  /** Resolves when the workers have stopped and their connections are closed. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startWorker(config: Config, logger: Logger): Promise<RunningWorker> {
  const sdkLogger = installRuntime(logger);
  const queue = config.temporal.taskQueue;
  const workflowBundle = config.temporal.workflowBundle
    ? { codePath: config.temporal.workflowBundle }
    : await bundleWorkflowCode({ workflowsPath, logger: sdkLogger });
  const db = await openDatabase(config.mongodbUri);
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const temporal = createTemporal(config.temporal);
  const jobs = createJobs(temporal.client, queue);
  const activities = createActivities({
    config,
    db,
    logger,
    jobs,
    kubo: createKubo(config.kubo.apiUrl),
    cluster: createClusterClient(config.cluster.apiUrl),
  });
  const common = { connection, namespace: config.temporal.namespace };
  const main = await Worker.create({ ...common, taskQueue: queue, workflowBundle, activities });
  const waits = await Worker.create({
    ...common,
    taskQueue: pinWait.taskQueue(queue),
    activities: { [pinWait.activity]: activities[pinWait.activity] },
    maxConcurrentActivityTaskExecutions: pinWait.concurrency,
  });
  const webhooks = await Worker.create({
    ...common,
    taskQueue: webhookJob.taskQueue(queue),
    workflowBundle,
    activities: { sendWebhookRound: activities.sendWebhookRound },
  });
  // The sweep (contracts/sweep.ts), the cleanup of abandoned multipart uploads
  // (contracts/multipart.ts) and the audit (contracts/audit.ts).
  for (const [job, every] of [
    [sweepJob, sweepJob.every],
    [multipartCleanupJob, S3_MULTIPART_CLEANUP_EVERY],
    [auditJob, auditJob.every],
  ] as const) {
    await ensureSchedule(temporal.client, logger, {
      scheduleId: job.scheduleId(queue),
      every,
      workflowType: job.workflowType,
      taskQueue: job.taskQueue(queue),
    });
  }

  const done = Promise.all([main.run(), waits.run(), webhooks.run()]).then(
    () => undefined,
    (err) => logger.error({ err }, 'worker failed'),
  );
  const closed = done.finally(async () => {
    await temporal.close();
    await connection.close();
    await db.close();
  });
  return {
    done: closed,
    async shutdown() {
      for (const w of [main, waits, webhooks]) if (w.getState() === 'RUNNING') w.shutdown();
      await closed;
    },
  };
}

/**
 * A schedule that starts `workflowType` every `every` on the deployment's queue, one run at a
 * time (a run still going when the next is due is not joined by another). Idempotent: a
 * schedule that exists is left as it is.
 */
async function ensureSchedule(
  client: Client,
  logger: Logger,
  s: { scheduleId: string; every: string; workflowType: string; taskQueue: string },
): Promise<void> {
  try {
    await client.schedule.create({
      scheduleId: s.scheduleId,
      spec: { intervals: [{ every: s.every }] },
      action: { type: 'startWorkflow', workflowType: s.workflowType, taskQueue: s.taskQueue, args: [] },
      policies: { overlap: 'SKIP' },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning))
      logger.warn({ err: (err as Error).message, scheduleId: s.scheduleId }, 'could not create a schedule');
  }
}
