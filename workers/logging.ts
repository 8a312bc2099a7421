// The Temporal SDK's own logs (worker state, webpack's bundle listing, Core's native lines)
// go through the service's pino logger at LOG_LEVEL, like every other line the worker prints.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import type { Logger } from '../infra/logger.js';

const SDK_LEVEL: Record<string, LogLevel> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN' };

/** A Temporal SDK logger writing to `logger` at its level. */
export function sdkLogger(logger: Logger): DefaultLogger {
  const level = SDK_LEVEL[logger.level] ?? 'ERROR';
  return new DefaultLogger(level, ({ level: entryLevel, message, meta }) => {
    // The waits queue's worker runs activities only, by design (workers/worker.ts): the SDK's
    // warning about that says nothing an operator should act on.
    const expected = message === 'No workflows registered, not polling for workflow tasks';
    const method = expected ? 'debug' : (entryLevel.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error');
    logger[method]({ ...meta, component: 'temporal' }, message);
  });
}

/** Installs the SDK runtime with that logger, Core's native logs forwarded to it. Once per
 * process, before the first connection; a second call keeps the first runtime. */
export function installRuntime(logger: Logger): DefaultLogger {
  const sdk = sdkLogger(logger);
  try {
    Runtime.install({ logger: sdk, telemetryOptions: { logging: { filter: { core: sdk.level, other: sdk.level }, forward: {} } } });
  } catch (err) {
    logger.debug({ err: (err as Error).message }, 'Temporal runtime already installed');
  }
  return sdk;
}
