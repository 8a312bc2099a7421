// The local stack: FerretDB, Temporal, Kubo and an IPFS Cluster peer on loopback, each in
// DATA_DIR/<piece>/ with its log in DATA_DIR/logs/. A piece whose URL is given in
// `external` is not started (the production path: all four external).
import fs from 'node:fs';
import path from 'node:path';
import { startClusterPeer } from './cluster.js';
import { startFerretDb } from './ferretdb.js';
import { startKubo } from './kubo.js';
import { freePorts } from './ports.js';
import type { Managed } from './process.js';
import { startTemporal } from './temporal.js';

export interface StackEndpoints {
  mongodbUri: string;
  temporalAddress: string;
  temporalUiUrl?: string;
  kuboApiUrl: string;
  kuboGatewayUrl?: string;
  kuboSwarmAddress?: string;
  clusterApiUrl: string;
}

export interface Stack {
  endpoints: StackEndpoints;
  started: string[];
  stop(): Promise<void>;
}

export interface StackOptions {
  dataDir: string;
  /** 'free': ports the kernel picks (tests); { base }: fixed ports, base + the offsets below. */
  ports: 'free' | { base: number };
  ui: boolean;
  external?: { mongodbUri?: string; temporalAddress?: string; kuboApiUrl?: string; clusterApiUrl?: string };
}

// Fixed offsets from the base port (npm start: base 17000, so Temporal is 17233, its UI 17234).
const OFFSETS = {
  kuboApi: 1,
  ferretdb: 17,
  ferretdbDebug: 18,
  kuboGateway: 80,
  clusterApi: 94,
  clusterProxy: 95,
  clusterSwarm: 96,
  clusterPinsvc: 97,
  temporal: 233,
  temporalUi: 234,
  temporalHttp: 235,
  temporalMetrics: 236,
  kuboSwarm: 401,
} as const;
type PortName = keyof typeof OFFSETS;

async function allocate(ports: StackOptions['ports']): Promise<Record<PortName, number>> {
  const names = Object.keys(OFFSETS) as PortName[];
  if (ports === 'free') {
    const free = await freePorts(names.length);
    return Object.fromEntries(names.map((n, i) => [n, free[i]!])) as Record<PortName, number>;
  }
  return Object.fromEntries(names.map((n) => [n, ports.base + OFFSETS[n]])) as Record<PortName, number>;
}

function say(line: string): void {
  process.stderr.write(`[stack] ${line}\n`);
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const external = options.external ?? {};
  const dataDir = path.resolve(options.dataDir);
  const logDir = path.join(dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const port = await allocate(options.ports);
  const running: Managed[] = [];
  const started: string[] = [];
  const stackFile = path.join(dataDir, 'stack.json');

  const stop = async (): Promise<void> => {
    for (const proc of [...running].reverse()) await proc.stop().catch(() => undefined);
    running.length = 0;
    fs.rmSync(stackFile, { force: true });
  };

  const timed = async <T extends { process: Managed }>(name: string, start: () => Promise<T>, where: (r: T) => string): Promise<T> => {
    const t = Date.now();
    const result = await start();
    running.push(result.process);
    started.push(name);
    say(`${name} ready at ${where(result)} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    return result;
  };

  try {
    // FerretDB, Temporal and Kubo do not depend on each other; the Cluster peer needs Kubo.
    // allSettled, not all: a failure must not leave a sibling starting after stop() ran.
    const settled = await Promise.allSettled([
      external.mongodbUri
        ? undefined
        : timed(
            'ferretdb',
            () => startFerretDb({ dataDir: path.join(dataDir, 'ferretdb'), logDir, port: port.ferretdb, debugPort: port.ferretdbDebug }),
            (r) => r.uri,
          ),
      external.temporalAddress
        ? undefined
        : timed(
            'temporal',
            () =>
              startTemporal({
                dataDir: path.join(dataDir, 'temporal'),
                logDir,
                ports: {
                  frontend: port.temporal,
                  http: port.temporalHttp,
                  metrics: port.temporalMetrics,
                  ui: options.ui ? port.temporalUi : undefined,
                },
              }),
            (r) => r.address,
          ),
      external.kuboApiUrl
        ? undefined
        : timed(
            'kubo',
            () =>
              startKubo({
                dataDir: path.join(dataDir, 'kubo'),
                logDir,
                ports: { api: port.kuboApi, gateway: port.kuboGateway, swarm: port.kuboSwarm },
              }),
            (r) => r.apiUrl,
          ),
    ]);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const [mongo, temporal, kubo] = settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as [
      Awaited<ReturnType<typeof startFerretDb>> | undefined,
      Awaited<ReturnType<typeof startTemporal>> | undefined,
      Awaited<ReturnType<typeof startKubo>> | undefined,
    ];
    const kuboApiUrl = external.kuboApiUrl ?? kubo!.apiUrl;
    const cluster = external.clusterApiUrl
      ? undefined
      : await timed(
          'cluster',
          () =>
            startClusterPeer({
              dataDir: path.join(dataDir, 'cluster'),
              logDir,
              kuboApiUrl,
              ports: { api: port.clusterApi, swarm: port.clusterSwarm, proxy: port.clusterProxy, pinsvc: port.clusterPinsvc },
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
    // Other processes (admin CLI, npm run api) find the running stack through this file.
    fs.writeFileSync(stackFile, JSON.stringify({ endpoints, pids: Object.fromEntries(running.map((p) => [p.name, p.pid])) }, null, 2));
    return { endpoints, started, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
