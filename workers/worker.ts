// A Temporal worker with the connections it owns: Temporal (NativeConnection), MongoDB,
// Kubo and IPFS Cluster. Activities are built from them; workflows come from workflows/.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { createClusterClient } from '../infra/cluster.js';
import type { Config } from '../infra/config.js';
import { openDatabase } from '../infra/db/index.js';
import { createKubo } from '../infra/kubo.js';
import type { Logger } from '../infra/logger.js';

/** A pre-built bundle (npm run build) is used when present; otherwise the sources are bundled at start. */
const bundlePath = fileURLToPath(new URL('../dist/workflow-bundle.js', import.meta.url));
const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface RunningWorker {
  worker: Worker;
  /** Resolves when the worker has stopped and its connections are closed. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startWorker(config: Config, logger: Logger): Promise<RunningWorker> {
  const db = await openDatabase(config.mongodbUri);
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const deps = { config, db, logger, kubo: createKubo(config.kubo.apiUrl), cluster: createClusterClient(config.cluster.apiUrl) };
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    ...(fs.existsSync(bundlePath) ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath }),
    activities: createActivities(deps),
  });
  const done = worker.run().finally(async () => {
    await connection.close();
    await db.close();
  });
  return {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
