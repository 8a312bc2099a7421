// `npm run api`: one API process, serving every surface on its own port (the REST API and
// the gateway). In production several run behind a load balancer; they share state only through
// MongoDB and Temporal.
import { loadConfig } from '../infra/config.js';
import { ConfigError } from '../infra/errors.js';
import { createLogger } from '../infra/logger.js';
import { startApiServer } from './server.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'stupa-api');
  const api = await startApiServer(config, logger);
  logger.info({ url: api.url, gateway: api.gatewayUrl }, 'REST API and gateway listening');
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    api.close().then(
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
