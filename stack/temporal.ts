// Temporal's development server (one process, SQLite file, optional Web UI) with the
// search attributes the workflows set, so jobs can be found by CID or user.
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../infra/temporal/contracts/job.js';
import { checkTemporalSetup } from '../infra/temporal/setup.js';
import { binaryPath } from './binaries.js';
import { DEFAULT_DB_SYNC, type DbSync } from './db-sync.js';
import { startProcess } from './process.js';

/** The dev server's namespace, made with the search attributes by its flags below. */
export const DEV_NAMESPACE = 'default';

export interface TemporalPorts {
  /** Frontend gRPC: what clients and workers connect to. */
  frontend: number;
  /** Frontend HTTP API (random when not given; named so stacks side by side cannot clash). */
  http: number;
  /** Prometheus /metrics (random when not given). */
  metrics: number;
  /** Web UI; none when undefined. */
  ui?: number;
}

export interface TemporalOptions {
  /** Holds temporal.db (workflow history survives restarts). */
  dataDir: string;
  logDir: string;
  ports: TemporalPorts;
  /** DEFAULT_DB_SYNC unless given (stack/db-sync.ts). */
  sync?: DbSync;
  signal?: AbortSignal;
  /** Called with the server's pid as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

export interface TemporalServer {
  /** host:port of the frontend, e.g. 127.0.0.1:7233 */
  address: string;
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

/** Connects, asks the health service, and checks the namespace's setup (infra/temporal/setup.ts); throws if not ready. */
export async function checkTemporal(address: string): Promise<void> {
  const connection = await Connection.connect({ address, connectTimeout: 2000 });
  try {
    await connection.healthService.check({});
    await checkTemporalSetup(connection, DEV_NAMESPACE);
  } finally {
    await connection.close();
  }
}

export async function startTemporal(options: TemporalOptions): Promise<TemporalServer> {
  fs.mkdirSync(options.dataDir, { recursive: true });
  const { ports } = options;
  const args = [
    'server',
    'start-dev',
    '--db-filename',
    path.join(options.dataDir, 'temporal.db'),
    // SQLite's defaults, which the CLI keeps, journal each commit in a file of its own and fsync
    // it and the database (journal_mode delete, synchronous full). A write-ahead log instead,
    // fsynced as DbSync says (stack/db-sync.ts): with normal, pins 31.5 -> 47.4/s and
    // Temporal's CPU per pin 17.7 -> 10.7 ms (docs/architecture/local-stack.md).
    '--sqlite-pragma',
    'journal_mode=wal',
    '--sqlite-pragma',
    `synchronous=${options.sync ?? DEFAULT_DB_SYNC}`,
    '--ip',
    '127.0.0.1',
    '--port',
    String(ports.frontend),
    '--http-port',
    String(ports.http),
    '--metrics-port',
    String(ports.metrics),
    // The UI would default to --port + 1000, which can belong to someone else.
    ...(ports.ui === undefined ? ['--headless'] : ['--ui-ip', '127.0.0.1', '--ui-port', String(ports.ui)]),
    '--namespace',
    DEV_NAMESPACE,
    '--log-level',
    'warn',
    // The contracts' search attributes, all Keyword (exact-match strings).
    ...SEARCH_ATTRIBUTES.flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    // The CLI's own config file and TEMPORAL_* variables are for client commands; the
    // service sets TEMPORAL_ADDRESS for itself, and none of it should shape the server.
    '--disable-config-file',
    '--disable-config-env',
  ];
  // History, matching and worker services listen on further loopback ports the CLI picks
  // from the kernel itself (no flag for them): free by construction, never fixed.
  const proc = startProcess({
    name: 'temporal',
    command: binaryPath('temporal', 'temporal'),
    args,
    logDir: options.logDir,
    dropEnv: ['TEMPORAL_'],
    onSpawn: options.onSpawn,
  });
  const address = `127.0.0.1:${ports.frontend}`;
  try {
    await proc.waitFor(() => checkTemporal(address), {
      timeoutMs: 60_000,
      what: 'healthy frontend with the Cid and UserId search attributes',
      signal: options.signal,
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { address, uiUrl: ports.ui === undefined ? undefined : `http://127.0.0.1:${ports.ui}`, pid: proc.pid, stop: () => proc.stop() };
}
