// PostgreSQL 15 for the production-shaped Temporal (STACK_TEMPORAL=cluster): Debian's
// postgresql-15 binaries, a data directory of its own under the stack's, loopback TCP only (no
// Unix socket: two stacks side by side would share /var/run/postgresql), and trust
// authentication for the one local role, because nothing but loopback can reach it.
// PostgreSQL refuses to run as root ("root execution of the PostgreSQL server is not
// permitted"): started as root, the stack runs initdb and the server as an unprivileged user
// (STACK_POSTGRES_USER, default postgres, the user Debian's package creates).
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { canConnect } from './ports.js';
import { startProcess, tail, type ManagedProcess } from './process.js';

const execFileAsync = promisify(execFile);

/** The role Temporal connects as; trust on loopback, so no password. */
export const POSTGRES_ROLE = 'stupa';

export interface PostgresOptions {
  /** PGDATA: created by initdb on the first start. */
  dataDir: string;
  logDir: string;
  port: number;
  /** Temporal's services open a pool each; the default 100 is too few for seven processes. */
  maxConnections?: number;
  signal?: AbortSignal;
  onSpawn?: (pid: number) => void;
}

export interface Postgres {
  host: string;
  port: number;
  role: string;
  pid: number;
  process: ManagedProcess;
  stop(): Promise<void>;
}

/** Where Debian's postgresql-15 puts its programs (STACK_POSTGRES_BIN overrides), found or not. */
export const postgresBinDir = (): string => process.env.STACK_POSTGRES_BIN || '/usr/lib/postgresql/15/bin';

/** postgresBinDir, or an error that says how to install PostgreSQL. */
export function postgresBin(): string {
  const dir = postgresBinDir();
  if (!fs.existsSync(path.join(dir, 'postgres'))) {
    throw new Error(
      `PostgreSQL 15 is not installed (${dir}/postgres is missing): apt-get install postgresql-15 ` +
        '(npm test installs it when it may), or set STACK_POSTGRES_BIN to its bin directory',
    );
  }
  return dir;
}

/** The uid and gid to run PostgreSQL as: ours, unless we are root. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const user = process.env.STACK_POSTGRES_USER || 'postgres';
  const id = (flag: string) => spawnSync('id', [flag, user], { encoding: 'utf8' });
  const uid = id('-u');
  const gid = id('-g');
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(`PostgreSQL does not run as root and there is no user "${user}" to run it as: create one, or set STACK_POSTGRES_USER`);
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * The unprivileged user must reach the data directory: each directory above it needs the
 * search (x) bit for it. Those the stack made itself (under the stack's own directory, such as
 * the 0700 directory mkdtemp makes for tests) get o+x, which lets others pass through but not
 * list; one outside it is the operator's to change, and the error says which.
 */
function openPath(dataDir: string, stackDir: string, owner: { uid: number; gid: number }): void {
  const chain: string[] = [];
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    chain.push(dir);
    if (dir === path.dirname(dir)) break;
  }
  for (const dir of chain.reverse()) {
    const st = fs.statSync(dir);
    const passable = st.uid === owner.uid ? st.mode & 0o100 : st.gid === owner.gid ? st.mode & 0o010 : st.mode & 0o001;
    if (passable) continue;
    if (dir === stackDir || dir.startsWith(`${stackDir}${path.sep}`)) fs.chmodSync(dir, st.mode | 0o001);
    else {
      throw new Error(
        `PostgreSQL runs as uid ${owner.uid}, which cannot pass through ${dir} to its data directory ${dataDir}: ` +
          `chmod o+x ${dir}, or choose a DATA_DIR elsewhere`,
      );
    }
  }
}

function initdb(bin: string, dataDir: string, owner: { uid: number; gid: number } | undefined, logFile: string): void {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (owner) fs.chownSync(dataDir, owner.uid, owner.gid);
  const res = spawnSync(
    path.join(bin, 'initdb'),
    ['-D', dataDir, '-U', POSTGRES_ROLE, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-instructions'],
    { encoding: 'utf8', ...(owner ? { uid: owner.uid, gid: owner.gid } : {}), cwd: os.tmpdir(), env: { PATH: process.env.PATH ?? '' } },
  );
  fs.appendFileSync(logFile, `${res.stdout ?? ''}${res.stderr ?? ''}`);
  if (res.status !== 0) throw new Error(`initdb failed (${res.status ?? res.error?.message}); ${logFile}:\n${tail(logFile)}`);
}

export async function startPostgres(options: PostgresOptions): Promise<Postgres> {
  const bin = postgresBin();
  const owner = runAs();
  const dataDir = path.resolve(options.dataDir);
  const logFile = path.join(options.logDir, 'postgres.log');
  fs.mkdirSync(options.logDir, { recursive: true });
  if (owner) openPath(dataDir, path.dirname(dataDir), owner);
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) initdb(bin, dataDir, owner, logFile);
  const proc = startProcess({
    name: 'postgres',
    command: path.join(bin, 'postgres'),
    args: [
      '-D',
      dataDir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-p',
      String(options.port),
      '-c',
      'unix_socket_directories=',
      '-c',
      `max_connections=${options.maxConnections ?? 300}`,
      // Every commit flushed before it returns, whatever STACK_DB_SYNC says: synchronous_commit
      // off (the cheaper setting) loses the last commits when the server itself dies (a crash,
      // `pg_ctl stop -m immediate`: up to three times wal_writer_delay, per PostgreSQL's
      // documentation), and Temporal's persistence assumes an acknowledged write stays (a
      // shard's range id, a task it handed out). PostgreSQL has no setting that writes to the
      // kernel at commit without the flush, as SQLite's synchronous=normal does (db-sync.ts).
      '-c',
      'synchronous_commit=on',
      // Logs go to stderr, which is the stack's log file.
      '-c',
      'logging_collector=off',
      '-c',
      'log_min_messages=warning',
    ],
    logDir: options.logDir,
    cwd: os.tmpdir(),
    // PG* variables would point clients (and some server settings) elsewhere.
    dropEnv: ['PG'],
    // SIGTERM is PostgreSQL's smart shutdown, which waits for every client to leave; SIGINT
    // rolls back their transactions and stops at once, cleanly (a checkpoint, no recovery).
    stopSignal: 'SIGINT',
    ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
    onSpawn: options.onSpawn,
  });
  try {
    await proc.waitFor(
      async () => {
        if (!(await canConnect(options.port))) throw new Error(`nothing listens on ${options.port} yet`);
        await query(options.port, 'SELECT 1');
      },
      { timeoutMs: 60_000, what: 'answer to SELECT 1', signal: options.signal },
    );
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { host: '127.0.0.1', port: options.port, role: POSTGRES_ROLE, pid: proc.pid, process: proc, stop: () => proc.stop(30_000) };
}

/** Runs one statement with Debian's psql (no Node driver in the project for this alone). */
export async function query(port: number, sql: string, database = 'postgres'): Promise<string> {
  const psql = path.join(postgresBin(), 'psql');
  try {
    const { stdout } = await execFileAsync(
      psql,
      ['-h', '127.0.0.1', '-p', String(port), '-U', POSTGRES_ROLE, '-d', database, '-tAqc', sql],
      {
        env: { PATH: process.env.PATH ?? '' },
        timeout: 10_000,
      },
    );
    return stdout.trim();
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`psql: ${(e.stderr || e.message).trim()}`);
  }
}

/**
 * `pg_ctl stop -m immediate`: every server process quits at once without a checkpoint, as in
 * a power cut; the next start replays the write-ahead log. Run as PostgreSQL's own user, since
 * pg_ctl refuses root too. For tests and the chaos run; the stack's supervisor starts it again.
 */
export function stopImmediately(dataDir: string): void {
  const owner = runAs();
  const res = spawnSync(path.join(postgresBin(), 'pg_ctl'), ['stop', '-D', path.resolve(dataDir), '-m', 'immediate'], {
    encoding: 'utf8',
    cwd: os.tmpdir(),
    env: { PATH: process.env.PATH ?? '' },
    ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
  });
  if (res.status !== 0) throw new Error(`pg_ctl stop -m immediate: ${(res.stderr || res.error?.message || `exit ${res.status}`).trim()}`);
}
