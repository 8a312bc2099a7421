// `npm run api`: one API process, serving every surface on its own port (the REST API and
// the gateway). In production several run behind a load balancer; they share state only through
// MongoDB and Temporal.
import v8 from 'node:v8';
import { loadConfig } from '../infra/config.js';
import { API_HEAP_GROWING_PERCENT } from '../infra/constants.js';
import { ConfigError } from '../infra/errors.js';
import { createLogger } from '../infra/logger.js';
import { startApiServer } from './server.js';

// Bytes streamed through this process (uploads, S3 PUTs, the gateway's relay) arrive as a new
// 64 KiB buffer per socket read, outside the JavaScript heap. V8 counts those allocated since its
// last full (mark-compact) collection toward the old generation's limit, which it sets after each
// one from its own allocation rate alone; with little else allocated it settles on the minimum
// step, about 8 MB over the ~55 MB the process keeps (measured with --trace-gc in a process up for
// a while: its idle-time collections had set that limit). A stream then crosses it every ~80 ms,
// and every crossing marks the whole heap again on V8's helper threads: 12-25 full collections a
// GiB, 1.8-2.5 CPU s of the 3.1-4.6 the process spent on a 1 GiB upload, where a fresh process
// spent 1.3-1.5. A fixed factor keeps the limit above what a stream holds between the young
// collections that free its buffers. Read by V8 at each collection, so setting it here takes
// effect (NODE_OPTIONS does not accept V8's heap flags but a few).
v8.setFlagsFromString(`--heap-growing-percent=${API_HEAP_GROWING_PERCENT}`);

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'stupa-api', config.logFormat);
  const api = await startApiServer(config, logger);
  logger.info({ url: api.url, gateway: api.gatewayUrl }, 'REST API and gateway listening');
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    api.close({ drainMs: config.shutdownDrainMs }).then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`stupa-api: ${err instanceof ConfigError ? err.message : (err as Error).stack}\n`);
  process.exit(1);
});
