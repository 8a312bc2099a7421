// FerretDB 1.24 on its SQLite backend: the MongoDB-protocol server of the local stack, so
// development and tests need no MongoDB install.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import mongoose from 'mongoose';
import { binaryPath } from './binaries.js';
import { DEFAULT_DB_SYNC, type DbSync } from './db-sync.js';
import { canConnect } from './ports.js';
import { startProcess } from './process.js';

export interface FerretDbOptions {
  /** FerretDB's own directory: SQLite files in sqlite/, its state.json beside them. */
  dataDir: string;
  logDir: string;
  port: number;
  /** DEFAULT_DB_SYNC unless given. */
  sync?: DbSync;
  signal?: AbortSignal;
  /** Called with the server's pid as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

export interface FerretDb {
  /** mongodb://127.0.0.1:PORT/stupa */
  uri: string;
  pid: number;
  stop(): Promise<void>;
}

/** One real round trip: the server speaks the wire protocol, not just accepts TCP. */
export async function pingMongo(uri: string): Promise<void> {
  const conn = await mongoose.createConnection(uri, { serverSelectionTimeoutMS: 1000 }).asPromise();
  try {
    await conn.db!.admin().ping();
  } finally {
    await conn.close();
  }
}

export async function startFerretDb(options: FerretDbOptions): Promise<FerretDb> {
  const sqliteDir = path.join(options.dataDir, 'sqlite');
  fs.mkdirSync(sqliteDir, { recursive: true });
  const proc = startProcess({
    name: 'ferretdb',
    command: binaryPath('ferretdb', 'ferretdb'),
    args: [
      '--handler=sqlite',
      // A directory URI: one SQLite file per database. The trailing slash is required, and a
      // file:// URL keeps paths with spaces working.
      //
      // synchronous: see DbSync (db-sync.ts). FerretDB leaves SQLite's default, full. With normal, 5 s of
      // webhook deliveries made 30 fsyncs against 819, and FerretDB's CPU per delivery was
      // 0.26-0.29 ms against 0.31-0.42 (measured alone on this machine; docs/architecture/local-stack.md).
      `--sqlite-url=${pathToFileURL(sqliteDir).href}/?_pragma=synchronous(${options.sync ?? DEFAULT_DB_SYNC})`,
      // state.json (instance UUID, telemetry decision) would otherwise land in the cwd.
      `--state-dir=${options.dataDir}`,
      `--listen-addr=127.0.0.1:${options.port}`,
      // The debug HTTP listener (metrics, pprof) defaults to the fixed 127.0.0.1:8088, which
      // would collide between stacks side by side; nothing here reads it, so "-" turns it off.
      '--debug-addr=-',
      '--telemetry=disable',
      // warn logs every client's unsupported endSessions at disconnect; startup failures
      // are logged at error level.
      '--log-level=error',
    ],
    logDir: options.logDir,
    // FERRETDB_* variables would set flags not named above (e.g. a Unix socket listener).
    dropEnv: ['FERRETDB_'],
    // Reading documents allocates much and keeps little: with the collector run at 4 times the
    // live heap instead of 2, a 10,000-document read took 0.55 s instead of 0.7 s (the heap
    // here stays under 100 MB). A GOGC of the caller's wins.
    env: { GOGC: process.env.GOGC ?? '400' },
    onSpawn: options.onSpawn,
  });
  const uri = `mongodb://127.0.0.1:${options.port}/stupa`;
  try {
    await proc.waitFor(
      async () => {
        if (!(await canConnect(options.port))) throw new Error(`nothing listens on ${options.port} yet`);
        await pingMongo(uri);
      },
      { timeoutMs: 30_000, what: 'answer to a MongoDB ping', signal: options.signal },
    );
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { uri, pid: proc.pid, stop: () => proc.stop() };
}
