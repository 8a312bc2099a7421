// The Temporal client side: the API starts and signals workflows through this. The worker
// owns its own NativeConnection (workers/worker.ts).
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config.js';
import { TEMPORAL_SETUP_CHECK_MEMORY_MS } from '../constants.js';
import { checkTemporalSetup, connectionOptions } from './setup.js';

export interface Temporal {
  client: Client;
  connection: Connection;
  taskQueue: string;
  /**
   * Throws unless the Temporal frontend answers within `timeoutMs` and the namespace is set up
   * (checkTemporalSetup, whose message says what to do). A passed setup check is trusted for
   * TEMPORAL_SETUP_CHECK_MEMORY_MS: /readyz, probed every few seconds, then asks the frontend
   * only whether it answers. A failed one is asked again at the next call.
   */
  check(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

type Options = Pick<Config['temporal'], 'address' | 'namespace' | 'taskQueue' | 'tls' | 'apiKey'>;

/** A lazy connection: the API starts even while Temporal is down, and /readyz says so. */
export function createTemporal(options: Options): Temporal {
  const connection = Connection.lazy(connectionOptions(options));
  const client = new Client({ connection, namespace: options.namespace });
  // The SDK's retry interceptor schedules retries on timers; closing the channel under one
  // throws from that timer. So close waits for the checks still in flight.
  const inFlight = new Set<Promise<unknown>>();
  let setupPassedAt = -Infinity;
  return {
    client,
    connection,
    taskQueue: options.taskQueue,
    async check(timeoutMs) {
      const setupKnown = Date.now() - setupPassedAt < TEMPORAL_SETUP_CHECK_MEMORY_MS;
      const call = connection.withDeadline(Date.now() + timeoutMs, async () => {
        if (setupKnown) await connection.workflowService.getSystemInfo({});
        else await checkTemporalSetup(connection, options.namespace);
      });
      inFlight.add(call);
      try {
        await call;
        if (!setupKnown) setupPassedAt = Date.now();
      } finally {
        inFlight.delete(call);
      }
    },
    async close() {
      await Promise.allSettled([...inFlight]);
      await connection.close().catch(() => undefined);
    },
  };
}
