// The local stack: FerretDB, Temporal, Kubo and an IPFS Cluster peer on loopback, each in
// <dataDir>/<piece>/ with its log in <dataDir>/logs/<piece>.log. A piece whose URL is given
// in `external` is not started and its URL is passed through (production: all four).
import fs from 'node:fs';
import path from 'node:path';
import { clusterIdentity, startClusterPeer } from './cluster.js';
import type { DbSync } from './db-sync.js';
import { startFerretDb } from './ferretdb.js';
import { kuboPeerId, startKubo } from './kubo.js';
import { MAX_PEERS, PEER_PORT_STEP, PEER_PORTS, peerName, waitForPeerset, type PeerPorts } from './peers.js';
import { assertPortsFree, freePorts } from './ports.js';
import { reclaim, stackFilePath, updateStackFile, writeStackFile } from './stack-file.js';
import { DEV_NAMESPACE, startTemporal } from './temporal.js';
import { CLUSTER_EXTRA_PORTS, clusterPortsAt, startTemporalCluster, type TemporalCluster } from './temporal-cluster.js';

export { MAX_PEERS } from './peers.js';

export interface StackEndpoints {
  mongodbUri: string;
  temporalAddress: string;
  /** The namespace the stack's Temporal is set up with (the dev server's default; the
   * production shape's stupa); the services use it unless TEMPORAL_NAMESPACE says otherwise. */
  temporalNamespace?: string;
  temporalUiUrl?: string;
  kuboApiUrl: string;
  kuboGatewayUrl?: string;
  /** The started Kubo's dialable address (/ip4/127.0.0.1/tcp/PORT/p2p/ID), for tests. */
  kuboSwarmAddress?: string;
  clusterApiUrl: string;
}

/** One Kubo node and the Cluster peer that drives it (the stack starts `peers` of them). */
export interface StackPeer {
  kuboApiUrl: string;
  kuboGatewayUrl: string;
  kuboSwarmAddress: string;
  clusterApiUrl: string;
  clusterPeerId: string;
  /** The Cluster peer's dialable address (/ip4/127.0.0.1/tcp/PORT/p2p/ID). */
  clusterSwarmAddress: string;
  pids: { kubo: number; cluster: number };
}

export interface Stack {
  /** The first peer's Kubo and Cluster, FerretDB and Temporal. */
  endpoints: StackEndpoints;
  /** Every Kubo + Cluster pair started here, the first one first (empty when both are external). */
  peers: StackPeer[];
  /** The pieces started here, in start order ('ferretdb', 'temporal', 'kubo', 'cluster'). */
  started: string[];
  /** How long each piece took to start, in ms (for the bench). */
  timings: Record<string, number>;
  /** The production-shaped Temporal's processes (STACK_TEMPORAL=cluster), for tests and operators. */
  temporalCluster?: TemporalCluster;
  /** Starts peer n's Kubo and Cluster peer again, as they were (after a test or an operator
   * killed them), and records their new pids; stops whichever of the two still runs first. */
  restartPeer(n: number): Promise<void>;
  /** Stops the started pieces in reverse order; never throws. */
  stop(): Promise<void>;
}

export interface StackOptions {
  dataDir: string;
  /** 'free': ports the kernel picks (tests, stacks side by side); { base }: base + OFFSETS. */
  ports: 'free' | { base: number };
  /** Temporal's Web UI. */
  ui: boolean;
  /** Kubo + Cluster peer pairs, one Cluster (CRDT consensus); 1 unless given (STACK_PEERS). */
  peers?: number;
  /** Temporal's shape: 'dev' (the CLI's dev server on SQLite, the default) or 'cluster' (its own
   * server's services as separate processes on PostgreSQL: stack/temporal-cluster.ts). STACK_TEMPORAL. */
  temporal?: TemporalShape;
  /** When FerretDB's and Temporal's SQLite fsync (DbSync); DEFAULT_DB_SYNC unless given (STACK_DB_SYNC). */
  dbSync?: DbSync;
  external?: { mongodbUri?: string; temporalAddress?: string; kuboApiUrl?: string; clusterApiUrl?: string };
  /** Aborting stops whatever has started and makes startStack reject. */
  signal?: AbortSignal;
}

/** Temporal's shapes in the stack (StackOptions.temporal). */
export const TEMPORAL_SHAPES = ['dev', 'cluster'] as const;
export type TemporalShape = (typeof TEMPORAL_SHAPES)[number];

/**
 * Fixed ports are base + these offsets (npm start: base 17000, so MongoDB 17017, Temporal
 * 17233 and its UI 17234, Kubo's API 17001, gateway 17080 and swarm 17401, Cluster 17094).
 * They echo each piece's usual port (27017, 7233/8233, 5001/8080/4001, 9094/9096), all
 * within base+1..base+401, so two stacks with bases 500 apart never overlap. Temporal's
 * history/matching/worker services also listen on loopback ports its CLI takes from the
 * kernel; FerretDB's debug listener and Cluster's IPFS proxy and Pinning Service API are off.
 * Temporal's production shape keeps the first four and adds PostgreSQL at base+332 and its
 * services' ports at base+240..255 (temporal-cluster.ts clusterPortsAt).
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

async function allocatePorts(
  ports: StackOptions['ports'],
  peers: number,
  cluster: boolean,
): Promise<{ port: Record<PortName, number>; peerPorts: PeerPorts[]; clusterPorts: number[] }> {
  const names = Object.keys(PORT_OFFSETS) as PortName[];
  if (ports === 'free') {
    const extra = cluster ? CLUSTER_EXTRA_PORTS : 0;
    const free = await freePorts(names.length + extra + (peers - 1) * PEER_PORTS.length);
    const port = Object.fromEntries(names.map((n, i) => [n, free[i]!])) as Record<PortName, number>;
    const clusterPorts = free.slice(names.length, names.length + extra);
    const more = free.slice(names.length + extra);
    const peerPorts = Array.from({ length: peers }, (_, n) =>
      n === 0 ? port : (Object.fromEntries(PEER_PORTS.map((k, j) => [k, more[(n - 1) * PEER_PORTS.length + j]!])) as PeerPorts),
    );
    return { port, peerPorts, clusterPorts };
  }
  const port = Object.fromEntries(names.map((n) => [n, ports.base + PORT_OFFSETS[n]])) as Record<PortName, number>;
  const peerPorts = Array.from(
    { length: peers },
    (_, n) => Object.fromEntries(PEER_PORTS.map((k) => [k, port[k] + n * PEER_PORT_STEP])) as PeerPorts,
  );
  return { port, peerPorts, clusterPorts: [] };
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
  const peerCount = options.peers ?? 1;
  if (!Number.isInteger(peerCount) || peerCount < 1 || peerCount > MAX_PEERS) throw new Error(`peers must be 1 to ${MAX_PEERS}`);
  if (peerCount > 1 && (external.kuboApiUrl || external.clusterApiUrl))
    throw new Error('several peers need the stack to start Kubo and Cluster');
  const clusterShape = !external.temporalAddress && options.temporal === 'cluster';
  const { port, peerPorts, clusterPorts: freeClusterPorts } = await allocatePorts(options.ports, peerCount, clusterShape);
  const temporalPorts = {
    frontend: port.temporal,
    http: port.temporalHttp,
    metrics: port.temporalMetrics,
    ui: options.ui ? port.temporalUi : undefined,
  };
  const clusterPorts = !clusterShape
    ? undefined
    : options.ports === 'free'
      ? {
          ...temporalPorts,
          postgres: freeClusterPorts[0]!,
          frontendMembership: freeClusterPorts[1]!,
          services: freeClusterPorts.slice(2),
        }
      : clusterPortsAt(options.ports.base, temporalPorts);
  if (options.ports !== 'free') {
    const wanted = {
      ...(external.mongodbUri ? {} : { ferretdb: port.ferretdb }),
      ...(external.temporalAddress
        ? {}
        : { temporal: port.temporal, 'temporal http': port.temporalHttp, 'temporal metrics': port.temporalMetrics }),
      ...(external.temporalAddress || !options.ui ? {} : { 'temporal ui': port.temporalUi }),
      ...(clusterPorts
        ? {
            postgres: clusterPorts.postgres,
            'temporal frontend membership': clusterPorts.frontendMembership,
            ...Object.fromEntries(clusterPorts.services.map((p, i) => [`temporal service port ${i + 1}`, p])),
          }
        : {}),
      ...Object.fromEntries(
        peerPorts.flatMap((p, n) => [
          ...(external.kuboApiUrl
            ? []
            : [
                [`${peerName('kubo', n)} api`, p.kuboApi],
                [`${peerName('kubo', n)} gateway`, p.kuboGateway],
                [`${peerName('kubo', n)} swarm`, p.kuboSwarm],
              ]),
          ...(external.clusterApiUrl
            ? []
            : [
                [`${peerName('cluster', n)} api`, p.clusterApi],
                [`${peerName('cluster', n)} swarm`, p.clusterSwarm],
              ]),
        ]),
      ),
    };
    await assertPortsFree(wanted);
  }

  // Recorded before anything is spawned, and each server the moment it is: an owner killed
  // at any point of the start leaves a file that names all it started.
  writeStackFile(dataDir, { owner: process.pid, pids: {}, startedAt: new Date().toISOString() });
  const spawned = (name: string) => (pid: number) => updateStackFile(dataDir, (doc) => void ((doc.pids ??= {})[name] = pid));

  const running: Running[] = [];
  const started: string[] = [];
  const timings: Record<string, number> = {};
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
    if (!started.includes(name)) started.push(name);
    timings[name] = Date.now() - t;
    say(`${name} ready at ${where(piece)} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    return piece;
  };

  try {
    // The peers' identities first (creating their repositories on a first start), so that each
    // Kubo and each Cluster peer starts knowing the others.
    const several = peerCount > 1;
    const ids = await Promise.all(
      peerPorts.map(async (_, n) => ({
        kubo: several ? await kuboPeerId(path.join(dataDir, peerName('kubo', n))) : '',
        cluster: several ? await clusterIdentity(path.join(dataDir, peerName('cluster', n))) : undefined,
      })),
    );
    const loopback = (p: number, id: string) => `/ip4/127.0.0.1/tcp/${p}/p2p/${id}`;
    // What every peer's Kubo and Cluster peer is given: its directory, log, name and pid record.
    const piece = (name: string) => ({ dataDir: path.join(dataDir, name), logDir, name, signal, onSpawn: spawned(name) });
    const startKuboPeer = (n: number) =>
      start(
        peerName('kubo', n),
        () =>
          startKubo({
            ...piece(peerName('kubo', n)),
            ports: { api: peerPorts[n]!.kuboApi, gateway: peerPorts[n]!.kuboGateway, swarm: peerPorts[n]!.kuboSwarm },
            peering: ids.flatMap((id, m) => (m === n ? [] : [{ id: id.kubo, addrs: [`/ip4/127.0.0.1/tcp/${peerPorts[m]!.kuboSwarm}`] }])),
          }),
        (r) => r.apiUrl,
      );
    // FerretDB, Temporal and the Kubo nodes do not depend on each other; a Cluster peer needs
    // its Kubo. allSettled rather than all: when one fails, the others must have finished
    // starting before stop() runs, or they would be left behind.
    const [mongo, devTemporal, temporalCluster, ...kubos] = await settleAll([
      external.mongodbUri
        ? undefined
        : start(
            'ferretdb',
            () =>
              startFerretDb({
                dataDir: path.join(dataDir, 'ferretdb'),
                logDir,
                port: port.ferretdb,
                sync: options.dbSync,
                signal,
                onSpawn: spawned('ferretdb'),
              }),
            (r) => r.uri,
          ),
      external.temporalAddress || clusterPorts
        ? undefined
        : start(
            'temporal',
            () =>
              startTemporal({
                dataDir: path.join(dataDir, 'temporal'),
                logDir,
                sync: options.dbSync,
                signal,
                onSpawn: spawned('temporal'),
                ports: temporalPorts,
              }),
            (r) => (r.uiUrl ? `${r.address} (UI ${r.uiUrl})` : r.address),
          ),
      clusterPorts
        ? start(
            'temporal-cluster',
            () =>
              startTemporalCluster({
                dataDir,
                logDir,
                ports: clusterPorts,
                signal,
                onSpawn: (name, pid) => spawned(name)(pid),
                say,
              }),
            (r) => `${r.address}, namespace ${r.namespace}, on PostgreSQL 127.0.0.1:${r.postgresPort}${r.uiUrl ? ` (UI ${r.uiUrl})` : ''}`,
          )
        : undefined,
      ...(external.kuboApiUrl ? [undefined] : peerPorts.map((_, n) => startKuboPeer(n))),
    ] as const);
    const temporal = devTemporal ?? temporalCluster;
    const kuboApiUrl = external.kuboApiUrl ?? kubos[0]!.apiUrl;
    const startClusterFor = (n: number, kuboUrl: string) =>
      start(
        peerName('cluster', n),
        () =>
          startClusterPeer({
            ...piece(peerName('cluster', n)),
            kuboApiUrl: kuboUrl,
            ports: { api: peerPorts[n]!.clusterApi, swarm: peerPorts[n]!.clusterSwarm },
            secret: ids[0]!.cluster?.secret,
            peerAddresses: ids.flatMap((id, m) => (m === n ? [] : [loopback(peerPorts[m]!.clusterSwarm, id.cluster!.id)])),
          }),
        (r) => r.apiUrl,
      );
    const clusters = external.clusterApiUrl
      ? []
      : await settleAll(peerPorts.map((_, n) => startClusterFor(n, kubos[n]?.apiUrl ?? kuboApiUrl)));
    if (several)
      await waitForPeerset(
        clusters.map((c) => c.apiUrl),
        signal,
      );

    const kubo = kubos[0];
    const endpoints: StackEndpoints = {
      mongodbUri: external.mongodbUri ?? mongo!.uri,
      temporalAddress: external.temporalAddress ?? temporal!.address,
      ...(external.temporalAddress ? {} : { temporalNamespace: temporalCluster?.namespace ?? DEV_NAMESPACE }),
      temporalUiUrl: temporal?.uiUrl,
      kuboApiUrl,
      kuboGatewayUrl: kubo?.gatewayUrl,
      kuboSwarmAddress: kubo?.swarmAddress,
      clusterApiUrl: external.clusterApiUrl ?? clusters[0]!.apiUrl,
    };
    const peers: StackPeer[] = clusters.flatMap((cluster, n) => {
      const k = kubos[n];
      if (!k) return [];
      return [
        {
          kuboApiUrl: k.apiUrl,
          kuboGatewayUrl: k.gatewayUrl,
          kuboSwarmAddress: k.swarmAddress,
          clusterApiUrl: cluster.apiUrl,
          clusterPeerId: cluster.id,
          clusterSwarmAddress: loopback(peerPorts[n]!.clusterSwarm, cluster.id),
          pids: { kubo: k.pid, cluster: cluster.pid },
        },
      ];
    });
    // Other processes (the admin CLI, npm run api/worker) find the running stack here.
    updateStackFile(dataDir, (doc) => {
      doc.endpoints = endpoints;
      doc.peers = peers;
    });
    const restartPeer = async (n: number) => {
      const peer = peers[n];
      if (!peer) throw new Error(`the stack has no peer ${n}`);
      for (const name of [peerName('cluster', n), peerName('kubo', n)]) {
        for (const piece of running.filter((r) => r.name === name)) await piece.stop();
      }
      const k = await startKuboPeer(n);
      const c = await startClusterFor(n, k.apiUrl);
      peer.pids = { kubo: k.pid, cluster: c.pid };
      updateStackFile(dataDir, (doc) => void (doc.peers = peers));
    };
    return { endpoints, peers, started, timings, ...(temporalCluster ? { temporalCluster } : {}), restartPeer, stop };
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
