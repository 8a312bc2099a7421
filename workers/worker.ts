// The Temporal workers of one process, with the connections they own: Temporal, MongoDB,
// Kubo and IPFS Cluster. Two task queues:
//   <TEMPORAL_TASK_QUEUE>        workflows and short activities;
//   <TEMPORAL_TASK_QUEUE>-waits  the long, heartbeating waits for content to be fetched,
//                                mostly asleep, so many may run at once.
import { fileURLToPath } from 'node:url';
import { ScheduleAlreadyRunning } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { createClusterClient } from '../infra/cluster.js';
import type { Config } from '../infra/config.js';
import { openDatabase } from '../infra/db/index.js';
import { createJobs } from '../infra/jobs.js';
import { createKubo } from '../infra/kubo.js';
import type { Logger } from '../infra/logger.js';
import { createTemporal } from '../infra/temporal.js';

/** Development bundles the workflow sources at start; production names a pre-built bundle
 * (npm run build writes dist/workflow-bundle.js) with WORKFLOW_BUNDLE. */
const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export const WAITS_CONCURRENCY = 2000;
// One schedule per task queue, so deployments (and test runs) sharing a Temporal namespace do not share it.
const sweepScheduleId = (taskQueue: string) => `stupa-sweep-holds:${taskQueue}`;

export interface RunningWorker {
  /** Resolves when the workers have stopped and their connections are closed. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startWorker(config: Config, logger: Logger): Promise<RunningWorker> {
  const db = await openDatabase(config.mongodbUri);
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const temporal = createTemporal(config.temporal);
  const jobs = createJobs(temporal.client, config.temporal.taskQueue);
  const activities = createActivities({
    config,
    db,
    logger,
    jobs,
    kubo: createKubo(config.kubo.apiUrl),
    cluster: createClusterClient(config.cluster.apiUrl),
  });
  const common = { connection, namespace: config.temporal.namespace };
  const main = await Worker.create({
    ...common,
    taskQueue: config.temporal.taskQueue,
    ...(config.temporal.workflowBundle ? { workflowBundle: { codePath: config.temporal.workflowBundle } } : { workflowsPath }),
    activities,
  });
  const waits = await Worker.create({
    ...common,
    taskQueue: `${config.temporal.taskQueue}-waits`,
    activities: { awaitClusterPin: activities.awaitClusterPin },
    maxConcurrentActivityTaskExecutions: WAITS_CONCURRENCY,
  });
  await ensureSweepSchedule(temporal.client, config.temporal.taskQueue, logger);

  const done = Promise.all([main.run(), waits.run()]).then(
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
      for (const w of [main, waits]) if (w.getState() === 'RUNNING') w.shutdown();
      await closed;
    },
  };
}

/** Every minute, re-signal holds whose sync signal was lost (workflows/sweep.ts). Idempotent. */
async function ensureSweepSchedule(client: ReturnType<typeof createTemporal>['client'], taskQueue: string, logger: Logger): Promise<void> {
  try {
    await client.schedule.create({
      scheduleId: sweepScheduleId(taskQueue),
      spec: { intervals: [{ every: '1m' }] },
      action: { type: 'startWorkflow', workflowType: 'sweepWorkflow', taskQueue, args: [] },
      policies: { overlap: 'SKIP' },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) logger.warn({ err: (err as Error).message }, 'could not create the sweep schedule');
  }
}
