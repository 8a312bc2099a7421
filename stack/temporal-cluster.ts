// Temporal in production shape (STACK_TEMPORAL=cluster): Temporal's own server, built from
// go.temporal.io/server at the version the pinned CLI embeds (stack/versions.json), on
// PostgreSQL 15 (stack/postgres.ts), with its services as separate processes: one frontend,
// two history and two matching services (a lost one's shards and task queues move to its twin
// through ring membership), one worker service (schedules, system workflows), and Temporal's
// UI server. The schema is created and upgraded by temporal-sql-tool from the server's
// versioned schema (embedded in the tool). Each process is started again when it exits
// (keep-running.ts). docs/architecture/local-stack.md walks it.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { checkTemporalSetup, setupTemporal } from '../infra/temporal/setup.js';
import { binaryPath } from './binaries.js';
import { keepRunning, type KeptProcess } from './keep-running.js';
import { startPostgres, query, POSTGRES_ROLE } from './postgres.js';
import { startProcess, type ManagedProcess } from './process.js';
import { canConnect } from './ports.js';

const execFileAsync = promisify(execFile);

/** The namespace the production shape sets up and the services use (TEMPORAL_NAMESPACE wins). */
export const CLUSTER_NAMESPACE = 'stupa';
/** Fixed when the database is created (Temporal cannot change it later); 4 suits one machine. */
const HISTORY_SHARDS = 4;
/** Closed workflows are kept this long for the UI and the audit. */
const RETENTION_DAYS = 7;
/** The service processes, in start order: two of history and matching, so one may be lost. */
export const CLUSTER_SERVICES = ['history-1', 'history-2', 'matching-1', 'matching-2', 'worker', 'frontend'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];
/** Ports of each service process but the frontend: gRPC, ring membership, Prometheus. */
const SERVICE_PORTS = 3;

export interface TemporalClusterPorts {
  frontend: number;
  http: number;
  metrics: number;
  ui?: number;
  postgres: number;
  frontendMembership: number;
  /** SERVICE_PORTS per process of CLUSTER_SERVICES but the frontend, in that order. */
  services: number[];
}

/** Ports beyond the dev server's four: PostgreSQL's, the frontend's ring port, and three per other service. */
export const CLUSTER_EXTRA_PORTS = 2 + (CLUSTER_SERVICES.length - 1) * SERVICE_PORTS;

/** Fixed-port layout for a port base (stack.ts PORT_OFFSETS keeps the dev server's four). */
export function clusterPortsAt(
  base: number,
  common: { frontend: number; http: number; metrics: number; ui?: number },
): TemporalClusterPorts {
  return {
    ...common,
    postgres: base + 332,
    frontendMembership: base + 240,
    services: Array.from({ length: (CLUSTER_SERVICES.length - 1) * SERVICE_PORTS }, (_, i) => base + 241 + i),
  };
}

export interface TemporalClusterOptions {
  /** Holds postgres/ and temporal-cluster/ (configuration). */
  dataDir: string;
  logDir: string;
  ports: TemporalClusterPorts;
  signal?: AbortSignal;
  /** Called with each process's name and pid whenever one is spawned (restarts included). */
  onSpawn?: (name: string, pid: number) => void;
  say: (line: string) => void;
}

export interface TemporalCluster {
  address: string;
  namespace: string;
  uiUrl?: string;
  postgresPort: number;
  /** What this start set up (nothing when the namespace and its search attributes were there). */
  setup: { namespaceCreated: boolean; searchAttributesAdded: string[] };
  /** Every supervised process by name: postgres, the services, ui. */
  processes: Map<string, KeptProcess>;
  stop(): Promise<void>;
}

type Json = Record<string, unknown>;

const sqlStore = (port: number, database: string, maxConns: number): Json => ({
  sql: {
    pluginName: 'postgres12',
    databaseName: database,
    connectAddr: `127.0.0.1:${port}`,
    connectProtocol: 'tcp',
    user: POSTGRES_ROLE,
    password: '',
    maxConns,
    maxIdleConns: maxConns,
    maxConnLifetime: '1h',
  },
});

/** One process's configuration: the shared parts and its own service's ports. JSON is YAML. */
function serverConfig(ports: TemporalClusterPorts, service: ClusterService, dynamicConfig: string): Json {
  const kind = service.replace(/-\d+$/, '');
  const rpcOf = (name: ClusterService) => {
    const i = CLUSTER_SERVICES.indexOf(name);
    return name === 'frontend'
      ? { grpcPort: ports.frontend, membershipPort: ports.frontendMembership, httpPort: ports.http, bindOnIP: '127.0.0.1' }
      : { grpcPort: ports.services[i * SERVICE_PORTS]!, membershipPort: ports.services[i * SERVICE_PORTS + 1]!, bindOnIP: '127.0.0.1' };
  };
  // Every kind must be named for the ring's monitor to track it ("service not tracked by
  // Monitor"); a process binds only its own ports, and finds the others' through the ring.
  const services = Object.fromEntries(
    ['frontend', 'history', 'matching', 'worker'].map((k) => [
      k,
      { rpc: rpcOf(k === kind ? service : (CLUSTER_SERVICES.find((s) => s.startsWith(k)) as ClusterService)) },
    ]),
  );
  const i = CLUSTER_SERVICES.indexOf(service);
  const metricsPort = service === 'frontend' ? ports.metrics : ports.services[i * SERVICE_PORTS + 2]!;
  const frontend = `127.0.0.1:${ports.frontend}`;
  return {
    log: { stdout: true, level: 'warn', format: 'json' },
    persistence: {
      defaultStore: 'default',
      visibilityStore: 'visibility',
      numHistoryShards: HISTORY_SHARDS,
      datastores: {
        // Per process; PostgreSQL's max_connections (postgres.ts) covers six processes' pools.
        default: sqlStore(ports.postgres, 'temporal', 15),
        visibility: sqlStore(ports.postgres, 'temporal_visibility', 5),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${metricsPort}` } },
    },
    services,
    // The worker service's system workflows and schedules reach the frontend here.
    publicClient: { hostPort: frontend },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: frontend,
          httpAddress: `127.0.0.1:${ports.http}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
    namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    dynamicConfigClient: { filepath: dynamicConfig, pollInterval: '10s' },
  };
}

/** Creates both databases on a first start and brings their schemas to the tool's latest version. */
async function prepareSchema(port: number, logFile: string): Promise<void> {
  const tool = binaryPath('temporal', 'temporal-sql-tool');
  const common = ['--plugin', 'postgres12', '--ep', '127.0.0.1', '-p', String(port), '-u', POSTGRES_ROLE];
  const run = async (args: string[]) => {
    try {
      const { stdout, stderr } = await execFileAsync(tool, [...common, ...args], { env: { PATH: process.env.PATH ?? '' } });
      fs.appendFileSync(logFile, `$ temporal-sql-tool ${args.join(' ')}\n${stdout}${stderr}`);
    } catch (err) {
      const e = err as Error & { stdout?: string; stderr?: string };
      fs.appendFileSync(logFile, `$ temporal-sql-tool ${args.join(' ')}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
      throw new Error(`temporal-sql-tool ${args.join(' ')} failed: ${(e.stderr || e.message).trim().split('\n').slice(-3).join(' ')}`);
    }
  };
  for (const [database, schema] of [
    ['temporal', 'postgresql/v12/temporal'],
    ['temporal_visibility', 'postgresql/v12/visibility'],
  ] as const) {
    const exists = (await query(port, `SELECT 1 FROM pg_database WHERE datname = '${database}'`)) === '1';
    if (!exists) await run(['--db', database, 'create-database']);
    const versioned = (await query(port, "SELECT 1 FROM pg_tables WHERE tablename = 'schema_version'", database)) === '1';
    if (!versioned) await run(['--db', database, 'setup-schema', '-v', '0.0']);
    // From the recorded version to the newest the tool carries: nothing when already there.
    await run(['--db', database, 'update-schema', '--schema-name', schema]);
  }
}

export async function startTemporalCluster(options: TemporalClusterOptions): Promise<TemporalCluster> {
  const { ports, say } = options;
  const confDir = path.join(options.dataDir, 'temporal-cluster');
  fs.mkdirSync(confDir, { recursive: true });
  const processes = new Map<string, KeptProcess>();
  const stop = async () => {
    // The UI, then the services together (each drains on SIGTERM), PostgreSQL last.
    await processes.get('ui')?.stop();
    await Promise.all(CLUSTER_SERVICES.map((name) => processes.get(name)?.stop(15_000)));
    await processes.get('postgres')?.stop();
  };
  try {
    const keep = async (name: string, start: () => Promise<ManagedProcess>) => {
      processes.set(name, await keepRunning(name, start, say));
    };
    await keep('postgres', async () => {
      const pg = await startPostgres({
        dataDir: path.join(options.dataDir, 'postgres'),
        logDir: options.logDir,
        port: ports.postgres,
        signal: options.signal,
        onSpawn: (pid) => options.onSpawn?.('postgres', pid),
      });
      return pg.process;
    });
    await prepareSchema(ports.postgres, path.join(options.logDir, 'postgres.log'));

    const dynamicConfig = path.join(confDir, 'dynamicconfig.yaml');
    // Nothing overridden yet: the file must exist for the server to watch it.
    if (!fs.existsSync(dynamicConfig)) fs.writeFileSync(dynamicConfig, '{}\n');
    const server = binaryPath('temporal', 'temporal-server');
    const startService = (service: ClusterService) => async () => {
      fs.writeFileSync(path.join(confDir, `${service}.yaml`), `${JSON.stringify(serverConfig(ports, service, dynamicConfig), null, 2)}\n`);
      const kind = service.replace(/-\d+$/, '');
      const proc = startProcess({
        name: `temporal-${service}`,
        command: server,
        args: ['--root', confDir, '--config', '.', '--env', service, '--allow-no-auth', 'start', '--service', kind],
        logDir: options.logDir,
        cwd: confDir,
        // TEMPORAL_* would reshape the server (root, config, environment).
        dropEnv: ['TEMPORAL_'],
        onSpawn: (pid) => options.onSpawn?.(`temporal-${service}`, pid),
      });
      // The worker service serves no gRPC, only its ring membership.
      const port =
        service === 'frontend'
          ? ports.frontend
          : ports.services[CLUSTER_SERVICES.indexOf(service) * SERVICE_PORTS + (kind === 'worker' ? 1 : 0)]!;
      await proc
        .waitFor(
          async () => {
            if (!(await canConnect(port))) throw new Error(`nothing listens on ${port} yet`);
          },
          { timeoutMs: 60_000, what: `${service} listening on ${port}`, signal: options.signal },
        )
        .catch(async (err) => {
          await proc.stop();
          throw err;
        });
      return proc;
    };
    // The first one alone: at start each process writes the cluster's metadata (the frontend's
    // address among it) and the system namespace when they are missing or changed, and processes
    // doing so at once fail on the version check ("SaveClusterMetadata encountered version
    // mismatch", seen on a start with new ports). Then the others together: each joins the ring
    // and takes its share.
    const [first, ...rest] = CLUSTER_SERVICES;
    await keep(first, startService(first));
    await Promise.all(rest.map((service) => keep(service, startService(service))));
    const address = `127.0.0.1:${ports.frontend}`;
    await waitForFrontend(address, options.signal);
    const connection = await Connection.connect({ address });
    let done: TemporalCluster['setup'];
    try {
      done = await setupTemporal(connection, { namespace: CLUSTER_NAMESPACE, retentionDays: RETENTION_DAYS });
      if (done.namespaceCreated || done.searchAttributesAdded.length > 0) {
        say(
          `set up Temporal: ${done.namespaceCreated ? `namespace ${CLUSTER_NAMESPACE} (retention ${RETENTION_DAYS} days)` : ''}` +
            `${done.searchAttributesAdded.length ? ` search attributes ${done.searchAttributesAdded.join(', ')}` : ''}`,
        );
      }
      await checkTemporalSetup(connection, CLUSTER_NAMESPACE);
    } finally {
      await connection.close();
    }
    let uiUrl: string | undefined;
    if (ports.ui !== undefined) {
      const uiPort = ports.ui;
      const uiConfig = {
        temporalGrpcAddress: address,
        host: '127.0.0.1',
        port: uiPort,
        enableUi: true,
        defaultNamespace: CLUSTER_NAMESPACE,
        cors: { cookieInsecure: true, allowOrigins: [] },
      };
      fs.writeFileSync(path.join(confDir, 'ui.yaml'), `${JSON.stringify(uiConfig, null, 2)}\n`);
      await keep('ui', async () => {
        const proc = startProcess({
          name: 'temporal-ui',
          command: binaryPath('temporal', 'temporal-ui-server'),
          args: ['--root', confDir, '--config', '.', '--env', 'ui', 'start'],
          logDir: options.logDir,
          cwd: confDir,
          dropEnv: ['TEMPORAL_'],
          onSpawn: (pid) => options.onSpawn?.('temporal-ui', pid),
        });
        await proc.waitFor(
          async () => {
            const res = await fetch(`http://127.0.0.1:${uiPort}/`);
            if (!res.ok) throw new Error(`UI answered ${res.status}`);
          },
          { timeoutMs: 30_000, what: 'the UI answering', signal: options.signal },
        );
        return proc;
      });
      uiUrl = `http://127.0.0.1:${uiPort}`;
    }
    return { address, namespace: CLUSTER_NAMESPACE, uiUrl, postgresPort: ports.postgres, setup: done, processes, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The frontend answers its health check and has found the history service's shards. */
async function waitForFrontend(address: string, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + 90_000;
  let last = '';
  for (;;) {
    if (signal?.aborted) throw new Error('aborted while waiting for the Temporal frontend');
    try {
      const connection = await Connection.connect({ address, connectTimeout: 2000 });
      try {
        await connection.healthService.check({});
        // The system namespace answers only once history owns its shards.
        await connection.workflowService.describeNamespace({ namespace: 'temporal-system' });
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`the Temporal frontend at ${address} was not ready in 90 s (last: ${last})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
