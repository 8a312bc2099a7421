// The chaos run's stack: each engine (FerretDB, Temporal, Kubo, the Cluster peer) and each of
// the service's processes (the worker, the API) started on its own, on ports and directories
// that stay the same across restarts, so that any one of them can be killed with SIGKILL and
// started again as an operator's supervisor would start it.
import crypto from 'node:crypto';
import path from 'node:path';
import { startClusterPeer } from '../../stack/cluster.js';
import { startFerretDb } from '../../stack/ferretdb.js';
import { startKubo } from '../../stack/kubo.js';
import { freePorts } from '../../stack/ports.js';
import { startApiProcess, startWorkerProcess } from '../../stack/services.js';
import { startTemporal } from '../../stack/temporal.js';

interface Running {
  pid: number;
  stop(): Promise<void>;
}

export interface Engine {
  name: 'ferretdb' | 'temporal' | 'kubo' | 'cluster' | 'worker' | 'api';
  /** SIGKILL, as a crash or the OOM killer would; resolves once the process has gone. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and data; resolves once it is healthy. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ChaosStack {
  engines: Engine[];
  apiUrl: string;
  s3Url: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

function engine(name: Engine['name'], run: () => Promise<Running>): Engine {
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

export async function startChaosStack(dataDir: string): Promise<ChaosStack> {
  const logDir = path.join(dataDir, 'logs');
  const [ferret, frontend, http, metrics, kuboApi, kuboGateway, kuboSwarm, clusterApi, clusterSwarm, apiPort, s3Port] = await freePorts(11);
  const env: Record<string, string> = {
    MONGODB_URI: `mongodb://127.0.0.1:${ferret}/stupa`,
    TEMPORAL_ADDRESS: `127.0.0.1:${frontend}`,
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
  };
  const engines: Engine[] = [
    engine('ferretdb', () => startFerretDb({ dataDir: path.join(dataDir, 'ferretdb'), logDir, port: ferret! })),
    engine('temporal', () =>
      startTemporal({ dataDir: path.join(dataDir, 'temporal'), logDir, ports: { frontend: frontend!, http: http!, metrics: metrics! } }),
    ),
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
  const stop = async () => {
    for (const e of [...engines].reverse()) await e.stop();
  };
  try {
    // In dependency order: the Cluster peer needs Kubo; the service needs all four.
    for (const e of engines) await e.start();
  } catch (err) {
    await stop();
    throw err;
  }
  return { engines, apiUrl: `http://127.0.0.1:${apiPort}`, s3Url: `http://127.0.0.1:${s3Port}`, env, stop };
}
