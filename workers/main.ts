// `npm run worker`: one worker process. Scale by running more; each polls the task queue.
import { loadConfig } from '../infra/config.js';
import { ConfigError, TemporalSetupError } from '../infra/errors.js';
import { createLogger } from '../infra/logger.js';
import { startWorker } from './worker.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'stupa-worker', config.logFormat);
  const running = await startWorker(config, logger);
  logger.info({ taskQueue: config.temporal.taskQueue, namespace: config.temporal.namespace }, 'worker polling');
  // Temporal's runtime shuts the worker down on SIGINT and SIGTERM: tasks in flight finish
  // or are handed back, then `done` resolves.
  await running.done;
  logger.info('worker stopped');
}

main().catch((err) => {
  // These say what to do; a stack would bury it.
  const told = err instanceof ConfigError || err instanceof TemporalSetupError;
  process.stderr.write(`stupa-worker: ${told ? err.message : (err as Error).stack}\n`);
  process.exit(1);
});
