// The local stack: FerretDB, Temporal, Kubo and an IPFS Cluster peer on loopback, each in
// <dataDir>/<piece>/ with its log in <dataDir>/logs/<piece>.log. A piece whose URL is given
// in `external` is not started and its URL is passed through (production: all four).
import fs from 'node:fs';
import path from 'node:path';
import { startClusterPeer } from './cluster.js';
import { startFerretDb } from './ferretdb.js';
import { startKubo } from './kubo.js';
import { assertPortsFree, freePorts } from './ports.js';
import { reclaim, stackFilePath, updateStackFile, writeStackFile } from './stack-file.js';
import { startTemporal } from './temporal.js';

export interface StackEndpoints {
  mongodbUri: string;
  temporalAddress: string;
  temporalUiUrl?: string;
  kuboApiUrl: string;
  kuboGatewayUrl?: string;
  /** The started Kubo's dialable address (/ip4/127.0.0.1/tcp/PORT/p2p/ID), for tests. */
  kuboSwarmAddress?: string;
  clusterApiUrl: string;
}

export interface Stack {
  endpoints: StackEndpoints;
  /** The pieces started here, in start order ('ferretdb', 'temporal', 'kubo', 'cluster'). */
  started: string[];
  /** Stops the started pieces in reverse order; never throws. */
  stop(): Promise<void>;
}

export interface StackOptions {
  dataDir: string;
  /** 'free': ports the kernel picks (tests, stacks side by side); { base }: base + OFFSETS. */
  ports: 'free' | { base: number };
  /** Temporal's Web UI. */
  ui: boolean;
  external?: { mongodbUri?: string; temporalAddress?: string; kuboApiUrl?: string; clusterApiUrl?: string };
  /** Aborting stops whatever has started and makes startStack reject. */
  signal?: AbortSignal;
}

/**
 * Fixed ports are base + these offsets (npm start: base 17000, so MongoDB 17017, Temporal
 * 17233 and its UI 17234, Kubo's API 17001, gateway 17080 and swarm 17401, Cluster 17094).
 * They echo each piece's usual port (27017, 7233/8233, 5001/8080/4001, 9094/9096), all
 * within base+1..base+401, so two stacks with bases 500 apart never overlap. Temporal's
 * history/matching/worker services also listen on loopback ports its CLI takes from the
 * kernel; FerretDB's debug listener and Cluster's IPFS proxy and Pinning Service API are off.
 */
export const PORT_OFFSETS = {
  kuboApi: 1,
  ferretdb: 17,
  kuboGateway: 80,
  clusterApi: 94,
  clusterSwarm: 96,
  temporal: 233,
  temporalUi: 234,
  temporalHttp: 235,
  temporalMetrics: 236,
  kuboSwarm: 401,
} as const;
type PortName = keyof typeof PORT_OFFSETS;

async function allocatePorts(ports: StackOptions['ports']): Promise<Record<PortName, number>> {
  const names = Object.keys(PORT_OFFSETS) as PortName[];
  if (ports === 'free') {
    const free = await freePorts(names.length);
    return Object.fromEntries(names.map((n, i) => [n, free[i]!])) as Record<PortName, number>;
  }
  return Object.fromEntries(names.map((n) => [n, ports.base + PORT_OFFSETS[n]])) as Record<PortName, number>;
}

function say(line: string): void {
  process.stderr.write(`[stack] ${line}\n`);
}

interface Running {
  name: string;
  stop(): Promise<void>;
}

/**
 * Starts the stack. With free ports, a start that failed because a server found its port taken
 * (probed free, then bound by something else first) is made again on other ports: up to three
 * times, each after the failed one stopped what it had started.
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startStackOnce(options);
    } catch (err) {
      const portTaken = /address already in use|EADDRINUSE/i.test(String((err as Error)?.message));
      if (options.ports !== 'free' || !portTaken || attempt >= 3 || options.signal?.aborted) throw err;
      say(`a server found its port taken before it could bind it; starting again on other ports (attempt ${attempt + 1})`);
    }
  }
}

async function startStackOnce(options: StackOptions): Promise<Stack> {
  const external = options.external ?? {};
  const dataDir = path.resolve(options.dataDir);
  const logDir = path.join(dataDir, 'logs');
  const stackFile = stackFilePath(dataDir);
  // Aborted by the caller's signal, or by the first piece that fails, so siblings still
  // waiting to become healthy give up at once instead of running into their timeouts.
  const abort = new AbortController();
  if (options.signal?.aborted) abort.abort();
  options.signal?.addEventListener('abort', () => abort.abort(), { once: true });
  const { signal } = abort;
  let firstError: unknown;
  fs.mkdirSync(logDir, { recursive: true });
  // What a stack whose owner died (SIGKILL) left running is stopped here; a live one is refused.
  const t = Date.now();
  const leftovers = await reclaim(dataDir);
  if (leftovers.length > 0) {
    say(`stopped what an earlier stack on ${dataDir} left running: ${leftovers.join(', ')} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  }
  const port = await allocatePorts(options.ports);
  if (options.ports !== 'free') {
    const wanted = {
      ...(external.mongodbUri ? {} : { ferretdb: port.ferretdb }),
      ...(external.temporalAddress
        ? {}
        : { temporal: port.temporal, 'temporal http': port.temporalHttp, 'temporal metrics': port.temporalMetrics }),
      ...(external.temporalAddress || !options.ui ? {} : { 'temporal ui': port.temporalUi }),
      ...(external.kuboApiUrl ? {} : { 'kubo api': port.kuboApi, 'kubo gateway': port.kuboGateway, 'kubo swarm': port.kuboSwarm }),
      ...(external.clusterApiUrl ? {} : { 'cluster api': port.clusterApi, 'cluster swarm': port.clusterSwarm }),
    };
    await assertPortsFree(wanted);
  }

  // Recorded before anything is spawned, and each server the moment it is: an owner killed
  // at any point of the start leaves a file that names all it started.
  writeStackFile(dataDir, { owner: process.pid, pids: {}, startedAt: new Date().toISOString() });
  const spawned = (name: string) => (pid: number) => updateStackFile(dataDir, (doc) => void ((doc.pids ??= {})[name] = pid));

  const running: Running[] = [];
  const started: string[] = [];
  // One shutdown however often stop() is called (a signal handler and a finally block may
  // both call it); later callers wait for the same one.
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      for (const piece of [...running].reverse()) {
        try {
          await piece.stop();
        } catch (err) {
          say(`stopping ${piece.name} failed: ${(err as Error).message}`);
        }
      }
      running.length = 0;
      try {
        fs.rmSync(stackFile, { force: true });
      } catch (err) {
        say(`could not remove ${stackFile}: ${(err as Error).message}`);
      }
    })());

  // Starts one piece, records it for stop(), and reports where it is and how long it took.
  const start = async <T extends { stop(): Promise<void> }>(name: string, run: () => Promise<T>, where: (r: T) => string) => {
    if (signal.aborted) throw new Error(`stack start aborted before ${name}`);
    const t = Date.now();
    let piece: T;
    try {
      piece = await run();
    } catch (err) {
      firstError ??= err;
      abort.abort();
      throw err;
    }
    running.push({ name, stop: () => piece.stop() });
    started.push(name);
    say(`${name} ready at ${where(piece)} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    return piece;
  };

  try {
    // FerretDB, Temporal and Kubo do not depend on each other; the Cluster peer needs Kubo.
    // allSettled rather than all: when one fails, the others must have finished starting
    // before stop() runs, or they would be left behind.
    const [mongo, temporal, kubo] = await settleAll([
      external.mongodbUri
        ? undefined
        : start(
            'ferretdb',
            () =>
              startFerretDb({ dataDir: path.join(dataDir, 'ferretdb'), logDir, port: port.ferretdb, signal, onSpawn: spawned('ferretdb') }),
            (r) => r.uri,
          ),
      external.temporalAddress
        ? undefined
        : start(
            'temporal',
            () =>
              startTemporal({
                dataDir: path.join(dataDir, 'temporal'),
                logDir,
                signal,
                onSpawn: spawned('temporal'),
                ports: {
                  frontend: port.temporal,
                  http: port.temporalHttp,
                  metrics: port.temporalMetrics,
                  ui: options.ui ? port.temporalUi : undefined,
                },
              }),
            (r) => (r.uiUrl ? `${r.address} (UI ${r.uiUrl})` : r.address),
          ),
      external.kuboApiUrl
        ? undefined
        : start(
            'kubo',
            () =>
              startKubo({
                dataDir: path.join(dataDir, 'kubo'),
                logDir,
                signal,
                onSpawn: spawned('kubo'),
                ports: { api: port.kuboApi, gateway: port.kuboGateway, swarm: port.kuboSwarm },
              }),
            (r) => r.apiUrl,
          ),
    ] as const);
    const kuboApiUrl = external.kuboApiUrl ?? kubo!.apiUrl;
    const cluster = external.clusterApiUrl
      ? undefined
      : await start(
          'cluster',
          () =>
            startClusterPeer({
              dataDir: path.join(dataDir, 'cluster'),
              logDir,
              signal,
              onSpawn: spawned('cluster'),
              kuboApiUrl,
              ports: { api: port.clusterApi, swarm: port.clusterSwarm },
            }),
          (r) => r.apiUrl,
        );

    const endpoints: StackEndpoints = {
      mongodbUri: external.mongodbUri ?? mongo!.uri,
      temporalAddress: external.temporalAddress ?? temporal!.address,
      temporalUiUrl: temporal?.uiUrl,
      kuboApiUrl,
      kuboGatewayUrl: kubo?.gatewayUrl,
      kuboSwarmAddress: kubo?.swarmAddress,
      clusterApiUrl: external.clusterApiUrl ?? cluster!.apiUrl,
    };
    // Other processes (the admin CLI, npm run api/worker) find the running stack here.
    updateStackFile(dataDir, (doc) => void (doc.endpoints = endpoints));
    return { endpoints, started, stop };
  } catch (err) {
    await stop();
    throw firstError ?? err;
  }
}

/** Like Promise.all, but rejects (with the first failure) only after every promise settled. */
async function settleAll<T extends readonly unknown[]>(promises: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}
