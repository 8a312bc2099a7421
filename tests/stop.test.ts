// `npm start` stopped the way a terminal's Ctrl-C, systemd, Docker or a test harness stops
// it: a signal to its whole process group (npm, the supervisor, and anything else in it), at
// several moments: while the stack starts, as soon as the API is ready, and under load. After
// each, no process of its data directory may be left, and the next case's start, on the same
// data directory and ports, shows that nothing blocks it. SIGKILL, which nothing can handle,
// must leave nothing that blocks the next start either. The cases run in order and share one
// data directory: each start but the first is the "second start" of the case before it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binaryPath } from '../stack/binaries.js';
import { assertPortsFree } from '../stack/ports.js';
import { readStackFile, writeStackFile } from '../stack/stack-file.js';
import { PORT_OFFSETS } from '../stack/stack.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-stop-'));
let portBase = 0;
const apiPort = () => portBase + 450; // above the stack's offsets, below the next base
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const measured: string[] = [];

/** Processes whose command line or environment names the data directory (npm, supervisor, API, worker, servers). */
function processesOfDataDir(): { pid: number; command: string }[] {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (/^[ZX]/.test(stat.slice(stat.lastIndexOf(') ') + 2))) continue; // exited, not yet reaped
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const text = `${cmdline}\0${fs.readFileSync(`/proc/${entry}/environ`, 'utf8')}`;
      if (text.includes(`${dataDir}/`) || text.includes(`${dataDir}\0`)) {
        found.push({ pid: Number(entry), command: cmdline.replace(/\0/g, ' ').trim().slice(0, 120) });
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** Waits until no process of the data directory is left; returns what is left after `timeoutMs`. */
async function untilNoneLeft(timeoutMs: number): Promise<{ pid: number; command: string }[]> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) {
    if (processesOfDataDir().length === 0) return [];
  }
  return processesOfDataDir();
}

function killAll(processes: { pid: number }[]): void {
  for (const { pid } of processes) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** A port base whose stack ports and API port are free, below the kernel's ephemeral range. */
async function pickPortBase(): Promise<number> {
  for (;;) {
    const base = 20_000 + crypto.randomInt(0, 110) * 100;
    // The edge's public ports, reports and purge listener, the API process's own (npmStart below).
    const service = [450, 451, 460, 461, 470, 471, 480, 481].map((offset) => [`service ${offset}`, base + offset]);
    const ports = Object.fromEntries([...Object.entries(PORT_OFFSETS).map(([name, offset]) => [name, base + offset]), ...service]);
    try {
      await assertPortsFree(ports);
      return base;
    } catch {
      // taken: another base
    }
  }
}

interface Run {
  npm: ChildProcess;
  startedAt: number;
  output(): string;
  /** Settles once every writer of npm's stdout (npm, start.ts) has exited. */
  closed: Promise<void>;
}

function npmStart(): Run {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // The test stack's variables would make npm start use it instead of starting its own.
  for (const name of Object.keys(env))
    if (name.startsWith('STUPA_TEST_') || /^(MONGODB_URI|TEMPORAL_ADDRESS|KUBO_API_URL|CLUSTER_API_URL|MASTER_KEY)$/.test(name))
      delete env[name];
  const npm = spawn('npm', ['start'], {
    cwd: process.cwd(),
    // Its own process group, as a shell gives a command, so the test can signal all of it.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...env,
      DATA_DIR: dataDir,
      STACK_PORT_BASE: String(portBase),
      API_HOST: '127.0.0.1',
      // The edge takes these; the API process the ports after each, the edge's reports API_PORT + 10
      // and its purge listener API_PORT + 11.
      API_PORT: String(apiPort()),
      GATEWAY_PORT: String(apiPort() + 20),
      S3_PORT: String(apiPort() + 30),
      LOG_LEVEL: 'warn',
    },
  });
  let output = '';
  npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // Every process writing to the pipes (npm, and start.ts after npm itself is gone) has exited.
  const closed = new Promise<void>((resolve) => npm.stdout!.on('close', () => resolve()));
  return { npm, startedAt: Date.now(), output: () => output, closed };
}

async function until(run: Run, what: string, check: () => Promise<boolean> | boolean, timeoutMs = 120_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) {
    if (run.npm.exitCode !== null || run.npm.signalCode !== null) throw new Error(`npm start ended before ${what}:\n${run.output()}`);
    if (await check()) return;
  }
  throw new Error(`no ${what} after ${timeoutMs} ms:\n${run.output()}`);
}

/** The start has spawned at least one server (recorded in stack.json) and is not done. */
const serverSpawned = (run: Run) =>
  until(run, 'server spawned', () => {
    const doc = readStackFile(dataDir);
    return Date.parse(doc.startedAt ?? '') >= run.startedAt - 1000 && Object.keys(doc.pids ?? {}).length > 0 && !doc.endpoints;
  });

const ready = (run: Run) =>
  until(run, 'GET /readyz 200', async () => {
    const res = await fetch(`http://127.0.0.1:${apiPort()}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
    return res?.status === 200;
  });

/**
 * Requests to the API and to Kubo from 8 loops until `stop` is aborted. Each request has a
 * signal of its own: fetch keeps an abort listener on the signal it is given until the request
 * is collected, so one signal shared by every request (over 1,500 of them on a fast machine)
 * flooded the output with MaxListenersExceededWarning.
 */
function load(stop: AbortSignal): Promise<number> {
  let requests = 0;
  const loop = async () => {
    while (!stop.aborted) {
      const form = new FormData();
      form.append('file', new Blob([crypto.randomBytes(64 * 1024)]), 'data');
      const signal = () => AbortSignal.timeout(10_000); // the servers stopping end what is in flight
      await Promise.all([
        fetch(`http://127.0.0.1:${apiPort()}/readyz`, { signal: signal() }).then((res) => res.arrayBuffer()),
        fetch(`http://127.0.0.1:${portBase + PORT_OFFSETS.kuboApi}/api/v0/add`, { method: 'POST', body: form, signal: signal() }).then(
          (res) => res.arrayBuffer(),
        ),
      ]).catch(() => sleep(50));
      requests += 2;
    }
  };
  return Promise.all(Array.from({ length: 8 }, loop)).then(() => requests);
}

type Moment = 'while starting' | 'when ready' | 'under load';

/** Starts, waits for `moment`, signals the process group, and checks everything stopped. */
async function startThenStop(signal: NodeJS.Signals, moment: Moment): Promise<void> {
  const run = npmStart();
  let loadDone: Promise<number> | undefined;
  const loadStop = new AbortController();
  if (moment === 'while starting') await serverSpawned(run);
  else await ready(run);
  const startMs = Date.now() - run.startedAt;
  if (moment === 'under load') {
    loadDone = load(loadStop.signal);
    await sleep(1500);
  }
  const t = Date.now();
  process.kill(-run.npm.pid!, signal);
  const left = await untilNoneLeft(60_000);
  const stopMs = Date.now() - t;
  loadStop.abort();
  const requests = (await loadDone) ?? 0;
  killAll(left);
  measured.push(
    `${signal} ${moment}: start ${seconds(startMs)}, stopped in ${seconds(stopMs)}${loadDone ? ` (${requests} requests)` : ''}`,
  );
  expect(left).toEqual([]);
  // start.ts prints its last line after its pieces are gone; on a loaded machine, later than
  // untilNoneLeft looks (it found npm's group empty of servers, not start.ts finished).
  await Promise.race([run.closed, sleep(15_000)]);
  // Stopped because of the signal, not because something failed first.
  expect(run.output()).toMatch(new RegExp(`\\[stupa\\] stopping \\(${signal}\\)`));
  expect(run.output()).toMatch(/\[stupa\] stopped/);
}

beforeAll(async () => {
  portBase = await pickPortBase();
});

afterAll(() => {
  killAll(processesOfDataDir());
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.stderr.write(`[stop.test] port base ${portBase}\n  ${measured.join('\n  ')}\n`);
});

const cases: [NodeJS.Signals, Moment][] = [
  ['SIGTERM', 'while starting'],
  ['SIGINT', 'when ready'],
  ['SIGHUP', 'under load'],
  ['SIGINT', 'while starting'],
  ['SIGHUP', 'when ready'],
  ['SIGTERM', 'under load'],
  ['SIGHUP', 'while starting'],
  ['SIGTERM', 'when ready'],
  ['SIGINT', 'under load'],
];

test.each(cases)('%s to the process group %s stops every piece; the next start works', startThenStop, 180_000);

describe('after a SIGKILL', () => {
  /** Starts; when `leftBefore` names processes a killed start left, checks this start stopped them. */
  async function startAfterKill(moment: Moment, leftBefore: number[]): Promise<Run> {
    const run = npmStart();
    if (moment === 'while starting') await serverSpawned(run);
    else await ready(run);
    const reclaimed = /left running: .* \((\d+\.\d) s\)/.exec(run.output())?.[1];
    measured.push(
      `start after a SIGKILL: ${seconds(Date.now() - run.startedAt)} to ${moment === 'when ready' ? 'ready' : 'a spawned server'}` +
        (reclaimed ? `, ${reclaimed} s of it stopping what the killed one left` : ''),
    );
    if (leftBefore.length > 0) expect(run.output()).toMatch(/\[stack\] stopped what an earlier stack .* left running/);
    expect(processesOfDataDir().filter((p) => leftBefore.includes(p.pid))).toEqual([]);
    return run;
  }

  /** SIGKILLs the group or the supervisor alone; returns the pids stack.json recorded, once the API and worker are gone. */
  async function kill(run: Run, target: 'group' | 'supervisor'): Promise<number[]> {
    const doc = readStackFile(dataDir);
    process.kill(target === 'group' ? -run.npm.pid! : doc.owner!, 'SIGKILL');
    // The API and worker notice their supervisor is gone and stop themselves.
    const services = Object.values(doc.services ?? {});
    const serviceLeft = () => processesOfDataDir().filter((p) => services.includes(p.pid));
    // The worker's stop is bounded at 20 s, its own fallback at 30 s (stack/supervised.ts).
    for (const deadline = Date.now() + 45_000; Date.now() < deadline && serviceLeft().length > 0;) await sleep(100);
    expect(serviceLeft()).toEqual([]);
    return [...Object.values(doc.pids ?? {}), ...services];
  }

  let left: number[] = [];

  test('of the whole process group: the API and worker stop themselves, the next start stops the servers', async () => {
    left = await kill(await startAfterKill('when ready', []), 'group');
    // The four servers, the edge, the API and the worker.
    expect(left.length).toBe(7);
    // Then the supervisor alone (npm lives on), once the next start is ready.
    left = await kill(await startAfterKill('when ready', left), 'supervisor');
  }, 240_000);

  test('while starting: the next start stops what was spawned, and a SIGTERM then stops everything', async () => {
    left = await kill(await startAfterKill('while starting', left), 'group');
    expect(left.length).toBeGreaterThan(0);
    const run = await startAfterKill('when ready', left);
    process.kill(-run.npm.pid!, 'SIGTERM');
    const remaining = await untilNoneLeft(60_000);
    killAll(remaining);
    expect(remaining).toEqual([]);
  }, 240_000);

  test('between a spawn and its record in stack.json: the next start finds the server by its command and stops it', async () => {
    // What a supervisor killed in that moment leaves: a stack.json whose owner is gone, and a
    // server of the data directory that the file does not name, holding its port.
    const owner = spawnSync('true').pid;
    writeStackFile(dataDir, { owner, pids: {}, startedAt: new Date().toISOString() });
    fs.mkdirSync(path.join(dataDir, 'ferretdb', 'sqlite'), { recursive: true });
    const server = spawn(
      binaryPath('ferretdb', 'ferretdb'),
      [
        '--handler=sqlite',
        `--sqlite-url=file://${dataDir}/ferretdb/sqlite/`,
        `--state-dir=${dataDir}/ferretdb`,
        `--listen-addr=127.0.0.1:${portBase + PORT_OFFSETS.ferretdb}`,
        '--debug-addr=-',
        '--telemetry=disable',
      ],
      { detached: true, stdio: 'ignore' },
    );
    const taken = () =>
      assertPortsFree({ ferretdb: portBase + PORT_OFFSETS.ferretdb }).then(
        () => false,
        () => true,
      );
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && !(await taken());) await sleep(100);
    expect(await taken()).toBe(true);
    const run = await startAfterKill('when ready', [server.pid!]);
    expect(run.output()).toMatch(new RegExp(`left running: ferretdb ${server.pid}`));
    process.kill(-run.npm.pid!, 'SIGTERM');
    const remaining = await untilNoneLeft(60_000);
    killAll(remaining);
    expect(remaining).toEqual([]);
  }, 240_000);
});
