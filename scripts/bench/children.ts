// The service under test as production runs it: the API and a worker, each its own Node
// process, wired to the bench's stack by environment variables. Started with the stack's own
// process helper, so their output goes to <dataDir>/logs/{api,worker}.log, they get SIGTERM
// then SIGKILL on stop, and they are killed if the bench process dies without stopping them.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../infra/paths.js';
import { startProcess, type ManagedProcess } from '../../infra/stack/process.js';
import type { StackEndpoints } from '../../infra/stack/stack.js';

const exec = promisify(execFile);

export const BENCH_PLAN = 'bench';

/** The shipped variant A plus a `bench` plan whose storage and rate limits never bind. */
export function writePlansFile(dir: string): string {
  const base = JSON.parse(fs.readFileSync(path.join(projectRoot, 'infra/plans/variant-a.json'), 'utf8'));
  base.plans[BENCH_PLAN] = { ...base.plans.nirvana, label: 'Benchmark', storageMB: 10_000_000, requestsPerMinute: 10_000_000 };
  const file = path.join(dir, 'plans.json');
  fs.writeFileSync(file, JSON.stringify(base, null, 2));
  return file;
}

/** The environment shared by the API, the worker and the admin CLI. */
export function serviceEnv(endpoints: StackEndpoints, dataDir: string, apiPort: number): Record<string, string> {
  const serviceDir = path.join(dataDir, 'service');
  fs.mkdirSync(serviceDir, { recursive: true });
  return {
    MONGODB_URI: endpoints.mongodbUri,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    KUBO_API_URL: endpoints.kuboApiUrl,
    CLUSTER_API_URL: endpoints.clusterApiUrl,
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    DATA_DIR: serviceDir,
    API_HOST: '127.0.0.1',
    API_PORT: String(apiPort),
    PLANS_FILE: writePlansFile(dataDir),
    LOG_LEVEL: 'warn',
    SHUTDOWN_TIMEOUT_MS: '2000',
  };
}

function startNode(name: string, entry: string, env: Record<string, string>, logDir: string): ManagedProcess {
  // `node --import tsx` rather than `npx tsx`: the pid is the service's own Node process,
  // whose /proc/<pid>/status is what the RSS figures read.
  return startProcess({ name, command: process.execPath, args: ['--import', 'tsx', entry], cwd: projectRoot, env, logDir });
}

/** `track` gets the stop function before the wait, so a process that never gets ready is still stopped. */
type Track = (stop: () => Promise<void>) => void;

export async function startApi(env: Record<string, string>, logDir: string, track: Track, signal: AbortSignal): Promise<ManagedProcess> {
  const api = startNode('api', 'api/main.ts', env, logDir);
  track(() => api.stop());
  await api.waitFor(
    async () => {
      const res = await fetch(`http://127.0.0.1:${env.API_PORT}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (!res.ok) throw new Error(`healthz ${res.status}`);
    },
    { timeoutMs: 60_000, what: 'a healthy API', signal },
  );
  return api;
}

export async function startWorkerProcess(
  env: Record<string, string>,
  logDir: string,
  track: Track,
  signal: AbortSignal,
): Promise<ManagedProcess> {
  // info, not warn: the start is recognised by the 'worker polling' line (as in tests/support/worker.ts).
  const worker = startNode('worker', 'workers/main.ts', { ...env, LOG_LEVEL: 'info' }, logDir);
  track(() => worker.stop());
  await worker.waitFor(
    async () => {
      if (!fs.readFileSync(worker.logFile, 'utf8').includes('worker polling')) throw new Error('not polling yet');
    },
    { timeoutMs: 120_000, what: "the 'worker polling' line", signal },
  );
  return worker;
}

/** The operator's way to get a user and key: the admin CLI, as the README shows. */
export async function createBenchUser(env: Record<string, string>): Promise<{ userId: string; apiKey: string }> {
  const email = `bench-${crypto.randomBytes(4).toString('hex')}@example.test`;
  const { stdout } = await exec(
    'npx',
    ['tsx', 'infra/admin/cli.ts', 'users', 'create', '--email', email, '--name', 'Bench', '--plan', BENCH_PLAN, '--json'],
    { cwd: projectRoot, env: { ...process.env, ...env } },
  );
  const user = JSON.parse(stdout) as { userId?: string; apiKey?: string };
  if (!user.userId || !user.apiKey) throw new Error(`admin CLI gave no user and key: ${stdout}`);
  return { userId: user.userId, apiKey: user.apiKey };
}

/** A field of /proc/<pid>/status in bytes (VmRSS: resident now, VmHWM: peak resident). */
export function procMemory(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/**
 * Resets the peak (VmHWM) to the current RSS, so a later VmHWM is the peak of what came
 * after, not of the process's start (module loading, bundling). Linux >= 4.0; false if refused.
 */
export function resetPeakMemory(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}
