// What every benchmark of `npm run bench` runs in: an isolated stack (free ports, a temporary
// directory, as `npm test` starts it), the API and a worker as their own processes, a user
// made with the admin CLI. Everything started here is stopped, and the directory removed, on
// every path (also Ctrl-C); a failure prints the last lines of the API's and worker's logs.
import crypto from 'node:crypto';
import { setMaxListeners } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from '../../stack/ports.js';
import { tail, type ManagedProcess } from '../../stack/process.js';
import { startStack, type Stack, type StackEndpoints, type TemporalShape } from '../../stack/stack.js';
import type { TemporalCluster } from '../../stack/temporal-cluster.js';
import { startApiProcess, startWorkerProcess } from '../../stack/services.js';
import { createBenchUser, serviceEnv } from './children.js';

/** The API's MongoDB operations so far, by `<method> <collection>`, from its /metrics
 * (api/rest/http/metrics.ts). */
export async function apiOperations(apiUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^stupa_mongodb_operations_total\{method="([^"]*)",collection="([^"]*)"\} (\d+)$/gm)) {
    counts.set(`${m[1]} ${m[2]}`.trim(), Number(m[3]));
  }
  return counts;
}

export function say(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}

function exitCode(signal: NodeJS.Signals): number {
  return 128 + (os.constants.signals[signal] ?? 1);
}

export interface BenchContext {
  /** The stack's temporary directory (each piece's data in <dataDir>/<piece>/). */
  dataDir: string;
  endpoints: StackEndpoints;
  /** The environment the API, the worker and the admin CLI were given (TEMPORAL_NAMESPACE: the
   * stack's namespace, which every Temporal client of a bench must use). */
  env: Record<string, string>;
  /** Seconds the stack took to start, whole ('stack') and by piece as stack.ts timed each
   * ('ferretdb', 'temporal' or 'temporal-cluster', 'kubo', 'cluster'), the pieces starting together. */
  startSeconds: Record<string, number>;
  /** The production-shaped Temporal's processes, when the stack runs that shape. */
  temporalCluster?: TemporalCluster;
  apiUrl: string;
  /** The API process's gateway (connect here; an account's gateway is the Host `<slug>.localhost:<port>`). */
  gatewayUrl: string;
  api: ManagedProcess;
  worker: ManagedProcess;
  user: { userId: string; apiKey: string };
  /** Load average (1 min) when the benchmark started, formatted. */
  loadStart: string;
  signal: AbortSignal;
  /** Registers a stop to run at cleanup, before the stack stops. */
  track(stop: () => Promise<void>): void;
}

/** A JSON call to the API as the bench user; anything but 2xx throws with the answer. */
export async function apiCall<T>(
  ctx: Pick<BenchContext, 'apiUrl' | 'user' | 'signal'>,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(`${ctx.apiUrl}${path}`, {
    method,
    headers: { 'X-Api-Key': ctx.user.apiKey, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: ctx.signal,
  });
  const answer = (await res.json()) as T;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

export interface BenchOptions {
  /** The stack's Temporal: the dev server (the default) or the production shape (stack.ts). */
  temporal?: TemporalShape;
}

/** Runs `body` on a fresh stack; resolves with the exit code (body's, or 1 on a failure). */
export async function runBench(body: (ctx: BenchContext) => Promise<number>, options: BenchOptions = {}): Promise<number> {
  const dataDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'stupa-bench-'));
  const logDir = path.join(dataDir, 'logs');
  const abort = new AbortController();
  // Every request of the run shares this signal, and Node's fetch keeps its listener on it
  // until the request is collected: thousands at once are expected, not a leak to warn of.
  setMaxListeners(0, abort.signal);
  // Stops of what was started, newest last; run in reverse, each once, before the stack.
  const stops: Array<() => Promise<void>> = [];
  const track = (stop: () => Promise<void>) => void stops.push(stop);
  let stackStarting: Promise<Stack> | undefined;
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const stop of stops.reverse()) await stop().catch((err: Error) => say(`stopping failed: ${err.message}`));
      // Aborted, a stack still starting stops what it started and rejects.
      const stack = await stackStarting?.catch(() => undefined);
      await stack?.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    })());

  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      // A second Ctrl-C: leave now; process.ts kills the children as this process exits.
      say(`${signal} again: exiting without cleanup (${dataDir} is left behind)`);
      process.exit(exitCode(signal));
    }
    interrupted = signal;
    say(`${signal}: stopping`);
    abort.abort();
    // Whatever the benchmark is waiting on may never settle (a Temporal call with the server
    // alive): clean up from here and exit, rather than wait for main to notice.
    void cleanup().finally(() => process.exit(exitCode(signal)));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const loadStart = os.loadavg()[0]!.toFixed(1);
    const t = Date.now();
    stackStarting = startStack({ dataDir, ports: 'free', ui: false, temporal: options.temporal, signal: abort.signal });
    const stack = await stackStarting;
    const { endpoints } = stack;
    const startSeconds = {
      ...Object.fromEntries(Object.entries(stack.timings).map(([piece, ms]) => [piece, ms / 1000])),
      stack: (Date.now() - t) / 1000,
    };
    say(`stack up in ${startSeconds.stack.toFixed(1)} s (${dataDir})`);
    const [apiPort, gatewayPort, s3Port, reportPort] = await freePorts(4);
    // Ready for an edge in front (edge.ts): its secret, and the port where the API takes its reports.
    const env = {
      // With the stack's namespace (the production shape's is not the services' default).
      ...serviceEnv(endpoints, dataDir, apiPort!, gatewayPort!, s3Port!),
      EDGE_SECRET: crypto.randomBytes(32).toString('hex'),
      EDGE_REPORT_PORT: String(reportPort),
    };
    const services = { logDir, track, signal: abort.signal };
    // BENCH_API_NODE_OPTIONS (BENCH_WORKER_NODE_OPTIONS) goes to the API (worker) process alone, e.g.
    // `--import ./scripts/bench/profile-preload.mjs` with BENCH_PROFILE_DIR for a CPU profile of it.
    const withOptions = (options?: string) => (options ? { ...env, NODE_OPTIONS: options } : env);
    const [api, worker] = await Promise.all([
      startApiProcess(withOptions(process.env.BENCH_API_NODE_OPTIONS), services),
      startWorkerProcess(withOptions(process.env.BENCH_WORKER_NODE_OPTIONS), services),
    ]);
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const user = await createBenchUser(env);
    say(`API ${apiUrl} (gateway ${gatewayUrl}, pid ${api.pid}) and worker ready; user ${user.userId}`);
    return await body({
      dataDir,
      endpoints,
      env,
      startSeconds,
      ...(stack.temporalCluster ? { temporalCluster: stack.temporalCluster } : {}),
      apiUrl,
      gatewayUrl,
      api,
      worker,
      user,
      loadStart,
      signal: abort.signal,
      track,
    });
  } catch (err) {
    if (interrupted) return exitCode(interrupted);
    say(`failed: ${(err as Error).stack ?? String(err)}`);
    for (const name of ['api', 'worker']) {
      const file = path.join(logDir, `${name}.log`);
      if (fs.existsSync(file)) say(`last lines of ${name}.log:\n${tail(file, 30)}`);
    }
    return 1;
  } finally {
    // Several runs in one process (bench -- --temporal): a later run's Ctrl-C is its own.
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    const t = Date.now();
    await cleanup();
    say(`everything stopped in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
}
