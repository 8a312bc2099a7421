// The chaos run's stack: each engine (FerretDB, Temporal, Kubo, the Cluster peer) and each of
// the service's processes (the worker, the API) started on its own, on ports and directories
// that stay the same across restarts, so that any one of them can be killed with SIGKILL and
// started again as an operator's supervisor would start it. With `temporal: 'cluster'`,
// Temporal is the production shape (stack/temporal-cluster.ts), which restarts its own
// processes; its faults are a history service, a matching service, the frontend, the worker
// service (SIGKILL each) and PostgreSQL (`pg_ctl stop -m immediate`).
import crypto from 'node:crypto';
import path from 'node:path';
import { startClusterPeer } from '../../stack/cluster.js';
import { startFerretDb } from '../../stack/ferretdb.js';
import { startKubo, type KuboNode } from '../../stack/kubo.js';
import { freePorts } from '../../stack/ports.js';
import { startApiProcess, startWorkerProcess } from '../../stack/services.js';
import { startTemporal } from '../../stack/temporal.js';
import { CLUSTER_EXTRA_PORTS, startTemporalCluster, type TemporalCluster } from '../../stack/temporal-cluster.js';
import { stopImmediately } from '../../stack/postgres.js';
import type { KeptProcess } from '../../stack/keep-running.js';

interface Running {
  pid: number;
  stop(): Promise<void>;
}

export interface Engine {
  name: string;
  /** SIGKILL, as a crash or the OOM killer would; resolves once the process has gone. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and data; resolves once it is healthy. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** A second Kubo node, the origin of content the stack's Kubo does not have; offline when stopped. */
export interface Origin {
  swarmAddress: string;
  /** Adds bytes (CIDv1, raw leaves) and answers their CID. */
  add(bytes: Uint8Array): Promise<string>;
  stop(): Promise<void>;
  /** Starts it again on the same repository and ports. */
  start(): Promise<void>;
}

export interface ChaosStack {
  origin: Origin;
  engines: Engine[];
  /** The engines to fault, in order: each of `engines` (dev), or the production shape's pieces. */
  faults: Engine[];
  readonly temporalCluster?: TemporalCluster;
  apiUrl: string;
  s3Url: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

function engine(name: string, run: () => Promise<Running>): Engine {
  let current: Running | undefined;
  return {
    name,
    async start() {
      current = await run();
    },
    async kill() {
      if (!current) return;
      try {
        process.kill(current.pid, 'SIGKILL');
      } catch {
        // gone already
      }
      await current.stop(); // waits for the exit; never throws
      current = undefined;
    },
    async stop() {
      await current?.stop();
      current = undefined;
    },
  };
}

/**
 * A piece of the production shape as a fault: killed (SIGKILL, or PostgreSQL's immediate stop),
 * then back once the stack's supervisor has started it again (keep-running.ts) and it listens.
 */
function supervised(name: string, piece: KeptProcess, kill: (pid: number) => void): Engine {
  let killedPid = -1;
  return {
    name,
    async kill() {
      killedPid = piece.current().pid;
      kill(killedPid);
      while (piece.current().pid === killedPid && piece.current().running()) await new Promise((r) => setTimeout(r, 50));
    },
    async start() {
      const deadline = Date.now() + 120_000;
      while (piece.current().pid === killedPid || !piece.current().running()) {
        if (Date.now() > deadline) throw new Error(`${name} was not started again within 120 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop: async () => undefined, // the cluster's stop() stops it
  };
}

export async function startChaosStack(
  dataDir: string,
  options: { temporal?: 'dev' | 'cluster'; /** Added to the API's and worker's environment. */ env?: Record<string, string> } = {},
): Promise<ChaosStack> {
  const logDir = path.join(dataDir, 'logs');
  const shape = options.temporal ?? 'dev';
  const [ferret, frontend, http, metrics, kuboApi, kuboGateway, kuboSwarm, clusterApi, clusterSwarm, apiPort, s3Port, ...originPorts] =
    await freePorts(14);
  const clusterPorts = shape === 'cluster' ? await freePorts(CLUSTER_EXTRA_PORTS) : [];
  let temporalCluster: TemporalCluster | undefined;
  const env: Record<string, string> = {
    MONGODB_URI: `mongodb://127.0.0.1:${ferret}/stupa`,
    TEMPORAL_ADDRESS: `127.0.0.1:${frontend}`,
    ...(shape === 'cluster' ? { TEMPORAL_NAMESPACE: 'stupa' } : {}),
    KUBO_API_URL: `http://127.0.0.1:${kuboApi}`,
    KUBO_GATEWAY_URL: `http://127.0.0.1:${kuboGateway}`,
    CLUSTER_API_URL: `http://127.0.0.1:${clusterApi}`,
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    DATA_DIR: dataDir,
    API_HOST: '127.0.0.1',
    API_PORT: String(apiPort),
    GATEWAY_PORT: '0',
    S3_PORT: String(s3Port),
    LOG_LEVEL: 'warn',
    // A dying request is answered 503 soon, so the load sees outages rather than hangs.
    SHUTDOWN_TIMEOUT_MS: '2000',
    ...options.env,
  };
  const engines: Engine[] = [
    engine('ferretdb', () => startFerretDb({ dataDir: path.join(dataDir, 'ferretdb'), logDir, port: ferret! })),
    shape === 'dev'
      ? engine('temporal', () =>
          startTemporal({
            dataDir: path.join(dataDir, 'temporal'),
            logDir,
            ports: { frontend: frontend!, http: http!, metrics: metrics! },
          }),
        )
      : engine('temporal', async () => {
          temporalCluster = await startTemporalCluster({
            dataDir,
            logDir,
            ports: {
              frontend: frontend!,
              http: http!,
              metrics: metrics!,
              postgres: clusterPorts[0]!,
              frontendMembership: clusterPorts[1]!,
              services: clusterPorts.slice(2),
            },
            say: (line) => process.stderr.write(`[chaos] ${line}\n`),
          });
          return { pid: temporalCluster.processes.get('frontend')!.current().pid, stop: () => temporalCluster!.stop() };
        }),
    engine('kubo', () =>
      startKubo({ dataDir: path.join(dataDir, 'kubo'), logDir, ports: { api: kuboApi!, gateway: kuboGateway!, swarm: kuboSwarm! } }),
    ),
    engine('cluster', () =>
      startClusterPeer({
        dataDir: path.join(dataDir, 'cluster'),
        logDir,
        kuboApiUrl: env.KUBO_API_URL!,
        ports: { api: clusterApi!, swarm: clusterSwarm! },
      }),
    ),
    engine('worker', () => startWorkerProcess(env, { logDir })),
    engine('api', () => startApiProcess(env, { logDir })),
  ];
  let originNode: KuboNode | undefined;
  const startOrigin = async () => {
    originNode = await startKubo({
      dataDir: path.join(dataDir, 'origin'),
      logDir,
      name: 'kubo-origin',
      ports: { api: originPorts[0]!, gateway: originPorts[1]!, swarm: originPorts[2]! },
    });
  };
  const stop = async () => {
    await originNode?.stop();
    for (const e of [...engines].reverse()) await e.stop();
  };
  try {
    // In dependency order: the Cluster peer needs Kubo; the service needs all four.
    for (const e of engines) await e.start();
    await startOrigin();
  } catch (err) {
    await stop();
    throw err;
  }
  const sigkill = (pid: number) => process.kill(pid, 'SIGKILL');
  const faults =
    shape === 'dev'
      ? engines
      : [
          supervised('temporal history', temporalCluster!.processes.get('history-1')!, sigkill),
          supervised('temporal matching', temporalCluster!.processes.get('matching-1')!, sigkill),
          supervised('temporal frontend', temporalCluster!.processes.get('frontend')!, sigkill),
          supervised('temporal worker service', temporalCluster!.processes.get('worker')!, sigkill),
          supervised('postgres', temporalCluster!.processes.get('postgres')!, () => stopImmediately(path.join(dataDir, 'postgres'))),
        ];
  const origin: Origin = {
    swarmAddress: originNode!.swarmAddress,
    async add(bytes) {
      const form = new FormData();
      form.append('file', new Blob([bytes]), 'x');
      const res = await fetch(`http://127.0.0.1:${originPorts[0]}/api/v0/add?cid-version=1&raw-leaves=true`, {
        method: 'POST',
        body: form,
      });
      return ((await res.json()) as { Hash: string }).Hash;
    },
    stop: async () => {
      await originNode?.stop();
      originNode = undefined;
    },
    start: startOrigin,
  };
  return {
    origin,
    engines,
    faults,
    // The current one: stopping and starting the 'temporal' engine makes a new one.
    get temporalCluster() {
      return temporalCluster;
    },
    apiUrl: `http://127.0.0.1:${apiPort}`,
    s3Url: `http://127.0.0.1:${s3Port}`,
    env,
    stop,
  };
}
