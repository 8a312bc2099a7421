// The Temporal client side: the API starts and signals workflows through this. The worker
// owns its own NativeConnection (workers/main.ts).
import { Client, Connection } from '@temporalio/client';

export interface Temporal {
  client: Client;
  connection: Connection;
  taskQueue: string;
  /** Throws unless the Temporal frontend answers within `timeoutMs`. */
  check(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** A lazy connection: the API starts even while Temporal is down, and /readyz says so. */
export function createTemporal(options: { address: string; namespace: string; taskQueue: string }): Temporal {
  const connection = Connection.lazy({ address: options.address });
  const client = new Client({ connection, namespace: options.namespace });
  // The SDK's retry interceptor schedules retries on timers; closing the channel under one
  // throws from that timer. So close waits for the checks still in flight.
  const inFlight = new Set<Promise<unknown>>();
  return {
    client,
    connection,
    taskQueue: options.taskQueue,
    async check(timeoutMs) {
      const call = connection.withDeadline(Date.now() + timeoutMs, () => connection.workflowService.getSystemInfo({}));
      inFlight.add(call);
      try {
        await call;
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
