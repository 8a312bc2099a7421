// A worker as its own process (as in production), so tests can also kill it mid-job.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { parseCid } from '../../infra/ipfs/cid.js';
import { DEFAULT_TASK_QUEUE } from '../../infra/constants.js';
import { syncJob } from '../../infra/temporal/contracts/holds.js';
import { tail } from '../../stack/process.js';
import { startWorkerProcess as startService } from '../../stack/services.js';
import { tempDir, testEnv } from './stack.js';

/**
 * The task queue of the tests' APIs and workers: the same for all, as in production. Workflow
 * IDs are business IDs (`sync:<multihash>`), shared by every queue of the namespace, so a
 * workflow that a worker-less test file started (uploading content that another file uploads
 * too) must be one that a later file's worker picks up.
 */
export const testTaskQueue = () => DEFAULT_TASK_QUEUE;

/** A worker process on the test stack, started as the bench and production start it. */
export async function startWorkerProcess(env: Record<string, string | undefined>): Promise<WorkerProcess> {
  const worker = await startService({ ...testEnv(), ...env }, { logDir: tempDir('stupa-worker-') });
  return {
    output: () => tail(worker.logFile, 200),
    async kill(signal = 'SIGTERM') {
      // SIGKILL: dies mid-task, as a crashed worker does; otherwise a graceful stop.
      if (signal === 'SIGKILL' && worker.running()) process.kill(worker.pid, 'SIGKILL');
      await worker.stop();
    },
  };
}

export interface WorkerProcess {
  output(): string;
  kill(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

/** Polls `read` until `done` accepts its value; fails with the last value after `timeoutMs`. */
export async function eventually<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await read();
    if (done(last)) return last;
    if (Date.now() > deadline) throw new Error(`${what} not reached in ${timeoutMs} ms; last value: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Resolves when the content's sync workflow has finished every round asked for so far: call it
 * after the change (a delete answered, an upload recorded) whose effect on Cluster is to be
 * checked. The change signalled the workflow before the API answered, so the run it waits for
 * includes that signal's round. An added record (an upload) is pinned before the API answers
 * and signals nothing (core/hold-sync.ts): with no workflow ever started there is nothing to
 * wait for.
 */
export async function syncRoundsDone(client: Client, cid: string): Promise<void> {
  try {
    await client.workflow.getHandle(syncJob.workflowId({ multihash: parseCid(cid).multihash })).result();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}
