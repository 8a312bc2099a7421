// DATA_DIR/stack.json: where the stack running on a data directory answers (its endpoints,
// which `npm run api`, `npm run worker` and the admin CLI read) and which processes it is made
// of, each recorded the moment it is spawned. The servers run in process groups of their own,
// so when their owner dies without stopping them (SIGKILL, the OOM killer) they keep running
// and holding their ports. The next start on the data directory reads this file, checks that
// each recorded pid is still that process (its command is one of ours and names this data
// directory) and that its owner is gone (the process is no longer its child), and stops it:
// a crash never blocks the next start, and a live stack is never touched.
import fs from 'node:fs';
import path from 'node:path';
import { cacheDir } from './binaries.js';
import { postgresBinDir } from './postgres.js';
import { writeFileAtomic } from './process.js';

export interface StackFile {
  /** The process that started the stack (npm start's supervisor, the test driver); the parent of every process below. */
  owner?: number;
  /** The servers by name (ferretdb, temporal, kubo, cluster, kubo-2, cluster-2, …), in spawn order. */
  pids?: Record<string, number>;
  /** The API and worker processes of npm start (api, api-2, …, worker, worker-2, …). */
  services?: Record<string, number>;
  /** The REST API of each API process npm start runs. */
  apis?: string[];
  endpoints?: object;
  /** Every Kubo + Cluster pair (stack.ts StackPeer): their URLs, Cluster peer IDs and pids. */
  peers?: object[];
  startedAt?: string;
}

/** In the command line of every service process that start.ts runs (see supervised.ts). */
export const SERVICE_MARKER = 'stack/supervised.';

export const stackFilePath = (dataDir: string): string => path.join(dataDir, 'stack.json');

export function readStackFile(dataDir: string): StackFile {
  try {
    return JSON.parse(fs.readFileSync(stackFilePath(dataDir), 'utf8')) as StackFile;
  } catch {
    return {};
  }
}

/** Written to a temporary file and renamed, so a reader never sees half of it. */
export function writeStackFile(dataDir: string, doc: StackFile): void {
  writeFileAtomic(stackFilePath(dataDir), `${JSON.stringify(doc, null, 2)}\n`);
}

export function updateStackFile(dataDir: string, change: (doc: StackFile) => void): void {
  const doc = readStackFile(dataDir);
  change(doc);
  writeStackFile(dataDir, doc);
}

interface ProcessInfo {
  ppid: number;
  /** When it started (clock ticks since boot): with the pid, who it is. */
  start: string;
  /** Arguments and environment variables, each ending in NUL. */
  cmdline: string;
  environ: string;
}

/** The process's state and start time from /proc/<pid>/stat; undefined when it is gone or a zombie. */
function stat(pid: number): { ppid: number; start: string } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses; starttime is field 22.
    const fields = text.slice(text.lastIndexOf(') ') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    return { ppid: Number(fields[1]), start: fields[19]! };
  } catch {
    return undefined;
  }
}

/**
 * Whether the process (this pid, started then) is a zombie whose other threads have not ended:
 * the thread group's leader of a multi-threaded server (Temporal and Kubo are Go programs) turns
 * zombie first, while the other threads, which share its files and sockets, are still exiting
 * (seen in CI: "port(s) already in use ... (temporal metrics)" right after the leftovers stopped).
 */
function exiting(pid: number, start: string): boolean {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1)!.split(' ');
    // state is field 3, num_threads field 20, starttime field 22.
    return (fields[0] === 'Z' || fields[0] === 'X') && fields[19] === start && Number(fields[17]) > 1;
  } catch {
    return false;
  }
}

/** What /proc says about a live process; undefined when it is gone, a zombie, or not ours to read. */
function inspect(pid: number): ProcessInfo | undefined {
  const st = stat(pid);
  if (!st) return undefined;
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
    return { ...st, cmdline, environ };
  } catch {
    return undefined;
  }
}

/** A server built by bootstrap.mjs, the production shape's PostgreSQL, or a service of start.ts, working on `dataDir`. */
function belongs(info: ProcessInfo, dataDir: string): boolean {
  const ours =
    info.cmdline.includes(`${path.join(cacheDir(), 'bin')}/`) ||
    info.cmdline.startsWith(`${postgresBinDir()}/`) ||
    info.cmdline.includes(SERVICE_MARKER);
  // Servers name their directory under dataDir in an argument or variable; services have DATA_DIR=dataDir.
  const text = `${info.cmdline}\0${info.environ}`;
  return ours && (text.includes(`${dataDir}/`) || text.includes(`\0DATA_DIR=${dataDir}\0`));
}

/** Whether a process with this pid exists (ours or not: EPERM says it does). */
export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** SIGTERM, SIGKILL after `graceMs`; resolves once the process is gone (or no longer the one we meant). */
async function stopLeftover(pid: number, start: string, graceMs: number): Promise<void> {
  // Gone once the process that was found (this pid, started then) has ended. Not by its command
  // line: an exiting process releases its memory, and with it the command line /proc shows,
  // before its files and sockets, so a stack started right after found a server's port still
  // taken (seen in CI: "port(s) already in use ... (temporal metrics)").
  const gone = () => stat(pid)?.start !== start && !exiting(pid, start);
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  for (const deadline = Date.now() + graceMs; Date.now() < deadline; await sleep(100)) if (gone()) return;
  signal('SIGKILL');
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(100)) if (gone()) return;
}

/**
 * Makes `dataDir` free for a new stack: throws when the processes recorded in its stack.json
 * still run under their owner, and stops them when their owner is gone (services first, then
 * the servers in reverse spawn order, as a normal stop does). Returns what it stopped.
 */
/**
 * Our processes that name `dataDir` and are not in `known`: a server spawned in the moment
 * before its pid was written (its owner killed in between) is found this way, so it cannot
 * hold its ports against the next start (seen in CI: Temporal's ports taken while the
 * reclaim had stopped only FerretDB, spawned a few milliseconds before it).
 */
function unrecorded(dataDir: string, known: Set<number>): [string, number][] {
  const found: [string, number][] = [];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!/^\d+$/.test(entry) || pid === process.pid || known.has(pid)) continue;
    const info = inspect(pid);
    if (info && belongs(info, dataDir)) found.push([path.basename(info.cmdline.split('\0')[0]!), pid]);
  }
  return found;
}

/**
 * Makes `dataDir` free for a new stack: throws when the processes recorded in its stack.json
 * (or found naming it) still run under their owner, and stops them when their owner is gone
 * (services first, then the servers in reverse spawn order, as a normal stop does). Returns
 * what it stopped.
 */
export async function reclaim(dataDir: string, graceMs = 10_000): Promise<string[]> {
  const doc = readStackFile(dataDir);
  const recorded = [...Object.entries(doc.services ?? {}), ...Object.entries(doc.pids ?? {}).reverse()];
  const describe = (list: [string, number][]) => list.map(([name, pid]) => `${name} ${pid}`).join(', ');
  if (!fs.existsSync('/proc/self/stat')) {
    // Without /proc (macOS) neither the command nor the parent can be checked: refuse, as
    // before, while any recorded pid is alive.
    const running = recorded.filter(([, pid]) => alive(pid));
    if (running.length > 0) throw new Error(`a stack may still run on ${dataDir} (${describe(running)}); stop it first`);
    return [];
  }
  // The unrecorded were spawned last: stopped first of the servers.
  const services = Object.keys(doc.services ?? {}).length;
  const candidates = [
    ...recorded.slice(0, services),
    ...unrecorded(dataDir, new Set(recorded.map(([, pid]) => pid))),
    ...recorded.slice(services),
  ];
  const ours = candidates.flatMap(([name, pid]) => {
    const info = inspect(pid);
    return info && belongs(info, dataDir) ? [{ name, pid, ppid: info.ppid, start: info.start }] : [];
  });
  // A stack.json without an owner was written before owners were recorded, or is gone: its
  // processes may well be in use.
  const owned = ours.filter((p) => doc.owner === undefined || p.ppid === doc.owner);
  if (owned.length > 0) {
    throw new Error(`a stack already runs on ${dataDir} (${describe(owned.map((p) => [p.name, p.pid]))}); stop it first`);
  }
  const isService = (p: { pid: number }) => Object.values(doc.services ?? {}).includes(p.pid);
  await Promise.all(ours.filter(isService).map((p) => stopLeftover(p.pid, p.start, graceMs)));
  for (const p of ours.filter((q) => !isService(q))) await stopLeftover(p.pid, p.start, graceMs);
  return ours.map((p) => `${p.name} ${p.pid}`);
}
