// The service under test as production runs it: its environment, wired to the bench's stack
// (the API and worker processes are started by stack/services.ts), a user made with the
// admin CLI, and the memory figures of a process.
import { execFile, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../infra/paths.js';
import type { StackEndpoints } from '../../stack/stack.js';

const exec = promisify(execFile);

export const BENCH_PLAN = 'bench';

/** The shipped variant A plus a `bench` plan whose storage, rate and gateway bandwidth limits never bind. */
export function writePlansFile(dir: string): string {
  const base = JSON.parse(fs.readFileSync(path.join(projectRoot, 'infra/plans/variant-a.json'), 'utf8'));
  base.plans[BENCH_PLAN] = {
    ...base.plans.nirvana,
    label: 'Benchmark',
    storageMB: 10_000_000,
    requestsPerMinute: 10_000_000,
    ipnsNames: 10_000_000,
    ipnsPublishesPerMonth: 10_000_000,
    gatewayBandwidthMB: 10_000_000_000,
    webhooks: 100,
  };
  const file = path.join(dir, 'plans.json');
  fs.writeFileSync(file, JSON.stringify(base, null, 2));
  return file;
}

/** The environment shared by the API, the worker and the admin CLI; the API's gateway listens on `gatewayPort`, its S3 interface on `s3Port`. */
export function serviceEnv(
  endpoints: StackEndpoints,
  dataDir: string,
  apiPort: number,
  gatewayPort: number,
  s3Port: number,
): Record<string, string> {
  const serviceDir = path.join(dataDir, 'service');
  fs.mkdirSync(serviceDir, { recursive: true });
  return {
    MONGODB_URI: endpoints.mongodbUri,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    ...(endpoints.temporalNamespace ? { TEMPORAL_NAMESPACE: endpoints.temporalNamespace } : {}),
    KUBO_API_URL: endpoints.kuboApiUrl,
    ...(endpoints.kuboGatewayUrl ? { KUBO_GATEWAY_URL: endpoints.kuboGatewayUrl } : {}),
    GATEWAY_PORT: String(gatewayPort),
    S3_PORT: String(s3Port),
    CLUSTER_API_URL: endpoints.clusterApiUrl,
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    DATA_DIR: serviceDir,
    API_HOST: '127.0.0.1',
    API_PORT: String(apiPort),
    PLANS_FILE: writePlansFile(dataDir),
    LOG_LEVEL: 'warn',
    // The webhooks bench's receiver is on loopback.
    WEBHOOK_ALLOW_PRIVATE: 'true',
    SHUTDOWN_TIMEOUT_MS: '2000',
  };
}

/** The operator's way to get a user and key: the admin CLI, as docs/operations/running.md shows. */
export async function createBenchUser(env: Record<string, string>): Promise<{ userId: string; apiKey: string }> {
  const email = `bench-${crypto.randomBytes(4).toString('hex')}@example.test`;
  const { stdout } = await exec(
    'npx',
    ['tsx', 'api/cli/admin.ts', 'users', 'create', '--email', email, '--name', 'Bench', '--plan', BENCH_PLAN, '--json'],
    { cwd: projectRoot, env: { ...process.env, ...env } },
  );
  const user = JSON.parse(stdout) as { userId?: string; apiKey?: string };
  if (!user.userId || !user.apiKey) throw new Error(`admin CLI gave no user and key: ${stdout}`);
  return { userId: user.userId, apiKey: user.apiKey };
}

/** Pins every thread of `pid` to `cpus` (e.g. "0", "0-1") with taskset; false when it refuses
 * (no taskset, one CPU). The benches run some rounds with Kubo on a core of its own. */
export function pin(pid: number, cpus: string): boolean {
  return spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' }).status === 0;
}

export const TICKS_PER_SECOND = 100; // USER_HZ: 100 on Linux everywhere Node runs

/** CPU time (user + system) a process has used so far, in ticks; 0 once it is gone. */
export function cpuTicks(pid: number): number {
  try {
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
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
