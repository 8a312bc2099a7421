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
import { createTemporal, type Temporal } from '../infra/temporal/client.js';
import { checkTemporalSetup, connectionOptions, isSetupRefused, setupTemporal } from '../infra/temporal/setup.js';
import { pinWait } from '../infra/temporal/contracts/pins.js';
import { webhookJob } from '../infra/temporal/contracts/webhooks.js';
import { auditJob } from '../infra/temporal/contracts/audit.js';
import { sweepJob } from '../infra/temporal/contracts/sweep.js';
import { multipartCleanupJob } from '../infra/temporal/contracts/multipart.js';
import { S3_MULTIPART_CLEANUP_EVERY, WORKER_PROMOTE_WAIT_MS, WORKFLOW_TASK_TIMEOUT_MS } from '../infra/constants.js';
import { promoteVersion } from '../infra/temporal/versioning.js';
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
  // First, so a Temporal that is not set up stops the worker before it bundles or connects.
  const temporal = createTemporal(config.temporal);
  try {
    await ensureSetup(temporal, config, logger);
  } catch (err) {
    await temporal.close();
    throw err;
  }
  const workflowBundle = config.temporal.workflowBundle
    ? { codePath: config.temporal.workflowBundle }
    : await bundleWorkflowCode({ workflowsPath, logger: sdkLogger });
  const db = await openDatabase(config.mongodbUri);
  const connection = await NativeConnection.connect(connectionOptions(config.temporal));
  const jobs = createJobs(temporal.client, queue);
  const activities = createActivities({
    config,
    db,
    logger,
    jobs,
    kubo: createKubo(config.kubo.apiUrl),
    cluster: createClusterClient(config.cluster.apiUrl),
  });
  const version = config.workerVersion;
  // Workflows without a behaviour of their own move with upgrades (each of ours states its own).
  const versioning = version
    ? {
        workerDeploymentOptions: {
          useWorkerVersioning: true as const,
          version: { deploymentName: version.deploymentName, buildId: version.buildId },
          defaultVersioningBehavior: 'AUTO_UPGRADE' as const,
        },
      }
    : {};
  // A stop has a bound: activities in flight get half of SHUTDOWN_TIMEOUT_MS to finish, then
  // are cancelled; the worker gives up on those that ignore the cancellation (one that never
  // heartbeats never hears of it) once a workflow task in flight has also had its time (the
  // server's default task timeout, 10 s: a forced stop under a task still running fails with
  // "Workflow execution context should have been disposed first", seen at 10 s on a loaded CI
  // machine whose first task took 7.5 s). Their attempts time out and are retried elsewhere.
  const stop = {
    shutdownGraceTime: config.shutdownTimeoutMs / 2,
    shutdownForceTime: config.shutdownTimeoutMs + WORKFLOW_TASK_TIMEOUT_MS,
  };
  const common = { connection, namespace: config.temporal.namespace, ...versioning, ...stop };
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
  // Once polling, this build takes new workflows (and the ones that move with upgrades).
  if (version?.promote === 'auto') {
    await promoteVersion(temporal.connection, config.temporal.namespace, version, { waitMs: WORKER_PROMOTE_WAIT_MS }).then(
      ({ previous, changed }) =>
        changed && logger.info({ buildId: version.buildId, previous }, 'this build is now the current version of the deployment'),
      (err) => logger.error({ err, buildId: version.buildId }, 'could not make this build current: npm run admin -- temporal promote'),
    );
  }
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
 * The namespace and search attributes the workers need: set up when TEMPORAL_SETUP=auto (what
 * exists is left as it is), only checked when `off` or when the server refuses this key the
 * setup (a hosted Temporal). Throws a TemporalSetupError that says what to do when they are
 * missing.
 */
async function ensureSetup(temporal: Temporal, config: Config, logger: Logger): Promise<void> {
  const { namespace } = config.temporal;
  if (config.temporalSetup.mode === 'auto') {
    try {
      const setup = await setupTemporal(temporal.connection, { namespace, retentionDays: config.temporalSetup.retentionDays });
      const created = setup.namespaceCreated || setup.searchAttributesAdded.length > 0;
      const retention = setup.namespaceCreated ? { retentionDays: config.temporalSetup.retentionDays } : {};
      if (created) logger.info({ namespace, ...setup, ...retention }, 'Temporal set up');
      else logger.debug({ namespace }, 'Temporal already set up');
      return;
    } catch (err) {
      if (!isSetupRefused(err)) throw err;
      logger.warn(
        { namespace, err: (err as Error).message },
        'Temporal refused the setup (TEMPORAL_SETUP=off stops trying); checking it instead',
      );
    }
  }
  await checkTemporalSetup(temporal.connection, namespace);
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
