// A worker as its own process (as in production), so tests can also kill it mid-job.
import { spawn, type ChildProcess } from 'node:child_process';
import { DEFAULT_TASK_QUEUE } from '../../infra/constants.js';
import { testEnv } from './stack.js';

export interface WorkerProcess {
  child: ChildProcess;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The task queue of the tests' APIs and workers: the same for all, as in production. Workflow
 * IDs are business IDs (`sync:<multihash>`), shared by every queue of the namespace, so a
 * workflow that a worker-less test file started (uploading content that another file uploads
 * too) must be one that a later file's worker picks up.
 */
export const testTaskQueue = () => DEFAULT_TASK_QUEUE;

export async function startWorkerProcess(env: Record<string, string | undefined>): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    // info: the start is recognised by the 'worker polling' line.
    env: { ...process.env, ...testEnv(), ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${log}`)), 60_000);
    const poll = setInterval(() => {
      if (log.includes('worker polling')) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve();
      } else if (child.exitCode !== null) {
        clearInterval(poll);
        clearTimeout(timer);
        reject(new Error(`worker exited:\n${log}`));
      }
    }, 100);
  });
  return {
    child,
    output: () => log,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
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
