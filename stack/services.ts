// The service's own processes, as production runs them: the API and a worker, each its own
// Node process (`node --import tsx <entry>`, so the pid is the service's own, whose
// /proc/<pid>/status the bench reads), wired by environment variables. The one way tests and
// the bench start them. Output goes to <logDir>/<name>.log; they get SIGTERM then SIGKILL on
// stop, and are killed if the starting process dies without stopping them (process.ts).
import { Connection } from '@temporalio/client';
import { DEFAULT_TASK_QUEUE, DEFAULT_TEMPORAL_NAMESPACE } from '../infra/constants.js';
import { projectRoot } from '../infra/paths.js';
import { startProcess, type ManagedProcess } from './process.js';

export interface ServiceOptions {
  logDir: string;
  /** The process name in logs; the log file is <logDir>/<name>.log. */
  name?: string;
  signal?: AbortSignal;
  /** Gets the stop function before the wait, so a process that never gets ready is still stopped. */
  track?: (stop: () => Promise<void>) => void;
  /** The checkout to run (the upgrade drill runs a previous commit's from a git worktree); this one unless given. */
  root?: string;
}

function startNode(name: string, entry: string, env: Record<string, string | undefined>, options: ServiceOptions): ManagedProcess {
  const defined = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const cwd = options.root ?? projectRoot;
  return startProcess({ name, command: process.execPath, args: ['--import', 'tsx', entry], cwd, env: defined, logDir: options.logDir });
}

/** `npm run api`'s process; resolves once /healthz answers on API_PORT. */
export async function startApiProcess(env: Record<string, string | undefined>, options: ServiceOptions): Promise<ManagedProcess> {
  const api = startNode(options.name ?? 'api', 'api/main.ts', env, options);
  options.track?.(() => api.stop());
  await api.waitFor(
    async () => {
      const res = await fetch(`http://127.0.0.1:${env.API_PORT}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (!res.ok) throw new Error(`healthz ${res.status}`);
    },
    { timeoutMs: 60_000, what: 'a healthy API', signal: options.signal },
  );
  return api;
}

/**
 * `npm run worker`'s process; resolves once Temporal sees it poll its task queue (a poller whose
 * identity is the SDK's default, `<pid>@<host>`), whatever its LOG_LEVEL.
 */
export async function startWorkerProcess(env: Record<string, string | undefined>, options: ServiceOptions): Promise<ManagedProcess> {
  if (!env.TEMPORAL_ADDRESS) throw new Error('startWorkerProcess needs TEMPORAL_ADDRESS');
  const worker = startNode(options.name ?? 'worker', 'workers/main.ts', env, options);
  options.track?.(() => worker.stop());
  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS });
  try {
    await worker.waitFor(
      async () => {
        const { pollers } = await connection.workflowService.describeTaskQueue({
          namespace: env.TEMPORAL_NAMESPACE || DEFAULT_TEMPORAL_NAMESPACE,
          taskQueue: { name: env.TEMPORAL_TASK_QUEUE || DEFAULT_TASK_QUEUE },
          taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
        });
        if (!pollers?.some((p) => p.identity?.startsWith(`${worker.pid}@`))) throw new Error('not polling yet');
      },
      { timeoutMs: 120_000, what: 'its poller on the task queue', signal: options.signal },
    );
  } finally {
    await connection.close();
  }
  return worker;
}
