// The Temporal SDK's own logs (worker state, webpack's bundle listing, Core's native lines)
// go through the service's pino logger at LOG_LEVEL, like every other line the worker prints.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import type { Logger } from '../infra/logger.js';

/** The SDK's notes on what a worker does not poll: by design (the waits queue's worker runs
 * activities only, workers/worker.ts; no worker serves Nexus), nothing an operator acts on. */
const QUIET_MESSAGES = new Set([
  'No workflows registered, not polling for workflow tasks',
  'No Nexus services registered, not polling for Nexus tasks',
]);

/** The last line of webpack's report of a bundle that compiled. */
const WEBPACK_COMPILED = /^webpack \d+\.\d+\.\d+ compiled/m;

const SDK_LEVEL: Record<string, LogLevel> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN' };

/** A Temporal SDK logger writing to `logger` at its level. */
export function sdkLogger(logger: Logger): DefaultLogger {
  const level = SDK_LEVEL[logger.level] ?? 'ERROR';
  return new DefaultLogger(level, ({ level: entryLevel, message, meta }) => {
    const expected = QUIET_MESSAGES.has(message);
    // webpack's listing of the workflow bundle's modules (dozens of lines at every start) is for
    // whoever debugs the bundle; its one-line summary ('Workflow bundle created') stays at info.
    const bundleListing = entryLevel === 'INFO' && WEBPACK_COMPILED.test(message);
    const method = expected || bundleListing ? 'debug' : (entryLevel.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error');
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
