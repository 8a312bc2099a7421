// `npm run bench -- --temporal`: Temporal in the production shape (stack/temporal-cluster.ts:
// Temporal's own server as separate processes, frontend, 2 history, 2 matching and the worker
// service, on PostgreSQL 15, namespace stupa) against the CLI's dev server (one process on
// SQLite, namespace default), in one run on one machine. Each run is a stack of its own
// (harness.ts runBench with `temporal`), the shapes alternating, dev first: its start (the
// Temporal piece as stack.ts times it, started alongside FerretDB and Kubo, and the whole
// stack), empty-workflow executions/s and pins/s end to end (pins.ts), small uploads/s
// (small.ts, SHAPE_SMALL_FILES files, one round), and the CPU the Temporal processes spent per
// pin and per empty workflow (PostgreSQL's backends included). Printed as cluster / dev ratios
// of the runs' medians. The logs of each run are kept (the stack's directory is removed) and
// searched for error lines.
import { DEFAULT_TEMPORAL_NAMESPACE } from '../../infra/constants.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readStackFile } from '../../stack/stack-file.js';
import type { TemporalShape } from '../../stack/stack.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { runBench, type BenchContext } from './harness.js';
import { benchEmptyWorkflow, benchPins, CONCURRENCY, PIN_COUNT } from './pins.js';
import { benchSmallFiles, CLIENTS } from './small.js';
import { spread } from './spread.js';

/** Runs of each shape, alternating (dev, cluster, dev, cluster): `--rounds N` sets it. */
export const SHAPE_ROUNDS = 2;
/** Small uploads per run (and as many Kubo adds): fewer than small.ts's 1,000, to keep the run short. */
export const SHAPE_SMALL_FILES = 500;

interface ShapeRun {
  shape: TemporalShape;
  /** The Temporal piece's start ('temporal' or 'temporal-cluster'), and the whole stack's, in s. */
  temporalStart: number;
  stackStart: number;
  emptyPerSecond: number;
  pinsPerSecond: number;
  pinWorkflows: number;
  pinServerErrors: number;
  smallPerSecond: number;
  kuboAddPerSecond: number;
  smallBusy: number;
  /** CPU ms of the Temporal processes per pin and per empty workflow: servers, and PostgreSQL's. */
  cpuPerPin: { servers: number; postgres: number };
  cpuPerEmpty: { servers: number; postgres: number };
  restarts: number;
  /** Log files with error lines: name, count, the first one. */
  logErrors: { file: string; count: number; first: string }[];
  keptLogs: string;
}

const fixed = (n: number, digits = 1) => n.toFixed(digits);

/** user+system ticks of a process and of its children, living (read) and ended (cutime, cstime). */
function treeTicks(pid: number): number {
  let total = 0;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    total += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  } catch {
    return 0;
  }
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = fs.readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ');
      if (Number(fields[1]) === pid) total += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone between the listing and the read.
    }
  }
  return total;
}

/** The Temporal processes' CPU ticks so far: the server processes, and PostgreSQL with its backends. */
function temporalTicks(ctx: BenchContext): { servers: number; postgres: number } {
  const cluster = ctx.temporalCluster;
  if (!cluster) {
    const pid = readStackFile(ctx.dataDir).pids?.temporal;
    return { servers: pid ? cpuTicks(pid) : 0, postgres: 0 };
  }
  let servers = 0;
  let postgres = 0;
  for (const [name, kept] of cluster.processes) {
    if (name === 'postgres') postgres += treeTicks(kept.current().pid);
    else servers += cpuTicks(kept.current().pid);
  }
  return { servers, postgres };
}

/** CPU ms per one of `count` between two readings. */
const perOne = (before: { servers: number; postgres: number }, after: { servers: number; postgres: number }, count: number) => ({
  servers: ((after.servers - before.servers) / TICKS_PER_SECOND / count) * 1000,
  postgres: ((after.postgres - before.postgres) / TICKS_PER_SECOND / count) * 1000,
});

/** Error lines of Temporal's servers (zap JSON), PostgreSQL, and the API and worker (pino); not a
 * process's start line (`--- <time> <command>`), whose flags may say --log-level=error. */
const ERROR_LINE = /"level":"(error|dpanic|panic|fatal)"|"level":(50|60)\b|(?<!-)\blevel=(error|fatal)\b|\b(ERROR|FATAL|PANIC):/i;
/** The logs searched: Temporal's (the dev server's, the cluster's processes), PostgreSQL's, the API's and worker's. */
const SEARCHED_LOG = /^(temporal.*|postgres|api|worker)\.log$/;

/** Copies the run's logs out of the stack's directory (removed at the end) and finds their error lines. */
function keepLogs(ctx: BenchContext, into: string): { logErrors: ShapeRun['logErrors']; keptLogs: string } {
  const logDir = path.join(ctx.dataDir, 'logs');
  fs.mkdirSync(into, { recursive: true });
  fs.cpSync(logDir, into, { recursive: true });
  const logErrors: ShapeRun['logErrors'] = [];
  for (const file of fs
    .readdirSync(into)
    .filter((f) => SEARCHED_LOG.test(f))
    .sort()) {
    const lines = fs
      .readFileSync(path.join(into, file), 'utf8')
      .split('\n')
      .filter((l) => ERROR_LINE.test(l));
    if (lines.length > 0) logErrors.push({ file, count: lines.length, first: lines[0]!.slice(0, 400) });
  }
  return { logErrors, keptLogs: into };
}

async function measure(ctx: BenchContext, shape: TemporalShape, keepDir: string, say: (line: string) => void): Promise<ShapeRun> {
  const { endpoints, apiUrl, user, signal } = ctx;
  const namespace = ctx.env.TEMPORAL_NAMESPACE ?? DEFAULT_TEMPORAL_NAMESPACE;
  const temporalStart = ctx.startSeconds[shape === 'cluster' ? 'temporal-cluster' : 'temporal'] ?? NaN;
  say(
    `${shape}: Temporal started in ${fixed(temporalStart)} s, the stack in ${fixed(ctx.startSeconds.stack ?? NaN)} s; namespace ${namespace}`,
  );

  let before = temporalTicks(ctx);
  const pins = await benchPins({ ...endpoints, apiUrls: [apiUrl], apiKey: user.apiKey, userId: user.userId, say }, signal);
  const cpuPerPin = perOne(before, temporalTicks(ctx), PIN_COUNT);
  say(
    `${shape}: pins ${fixed(pins.pinsPerSecond)}/s (${pins.workflows} took a workflow); Temporal cpu ms per pin ${fixed(cpuPerPin.servers + cpuPerPin.postgres, 2)}`,
  );

  before = temporalTicks(ctx);
  const empty = await benchEmptyWorkflow(endpoints.temporalAddress, signal, namespace);
  const cpuPerEmpty = perOne(before, temporalTicks(ctx), PIN_COUNT);
  say(
    `${shape}: empty workflow ${fixed(empty.perSecond)}/s; Temporal cpu ms per one ${fixed(cpuPerEmpty.servers + cpuPerEmpty.postgres, 2)}`,
  );

  const small = await benchSmallFiles(ctx, say, 1, SHAPE_SMALL_FILES);
  const restarts = ctx.temporalCluster ? [...ctx.temporalCluster.processes.values()].reduce((n, p) => n + p.restarts(), 0) : 0;
  return {
    shape,
    temporalStart,
    stackStart: ctx.startSeconds.stack ?? NaN,
    emptyPerSecond: empty.perSecond,
    pinsPerSecond: pins.pinsPerSecond,
    pinWorkflows: pins.workflows,
    pinServerErrors: pins.serverErrors,
    smallPerSecond: small.apiPerSecond.median,
    kuboAddPerSecond: small.kuboPerSecond.median,
    smallBusy: small.busy,
    cpuPerPin,
    cpuPerEmpty,
    restarts,
    ...keepLogs(ctx, keepDir),
  };
}

/** `dev a / cluster b` figures of the runs, their medians, and cluster / dev. */
function ratioLine(label: string, runs: ShapeRun[], figure: (r: ShapeRun) => number, unit: string, digits = 1, note = ''): string {
  const of = (shape: TemporalShape) => runs.filter((r) => r.shape === shape).map(figure);
  const cluster = spread(of('cluster')).median;
  const dev = spread(of('dev')).median;
  const each = (shape: TemporalShape) =>
    of(shape)
      .map((v) => fixed(v, digits))
      .join(', ');
  return (
    `bench: temporal ${label.padEnd(18)} cluster ${fixed(cluster, digits)}${unit} / dev ${fixed(dev, digits)}${unit} = ${fixed(cluster / dev, 2)}  ` +
    `[runs: cluster ${each('cluster')}; dev ${each('dev')}]${note}`
  );
}

export async function benchTemporalShapes(rounds: number, say: (line: string) => void): Promise<number> {
  const loadStart = fixed(os.loadavg()[0]!);
  const keepRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-bench-temporal-logs-'));
  const order: TemporalShape[] = Array.from({ length: rounds }, () => ['dev', 'cluster'] as const).flat();
  const runs: ShapeRun[] = [];
  const t = Date.now();
  for (const [i, shape] of order.entries()) {
    say(`temporal shapes: run ${i + 1} of ${order.length}, ${shape}`);
    let run: ShapeRun | undefined;
    const code = await runBench(
      async (ctx) => {
        run = await measure(ctx, shape, path.join(keepRoot, `${i + 1}-${shape}`), say);
        return 0;
      },
      { temporal: shape },
    );
    if (code !== 0 || !run) {
      say(`temporal shapes: the ${shape} run failed (exit ${code}); ${runs.length} runs done, logs of those in ${keepRoot}`);
      return code || 1;
    }
    runs.push(run);
  }
  const cpu = (c: { servers: number; postgres: number }) => c.servers + c.postgres;
  const clusterCpu = (pick: (r: ShapeRun) => { servers: number; postgres: number }) => {
    const of = runs.filter((r) => r.shape === 'cluster').map(pick);
    return `  [cluster: services ${fixed(spread(of.map((c) => c.servers)).median, 2)} + PostgreSQL ${fixed(spread(of.map((c) => c.postgres)).median, 2)}]`;
  };
  // Local content is pinned by the POST itself when Kubo has it (core/pins.ts): no workflow, no Temporal.
  const noPinWorkflows = runs.every((r) => r.pinWorkflows === 0)
    ? '; none took a workflow: the API pinned each by its POST, so this figure does not exercise Temporal'
    : '';
  const lines = [
    `bench: temporal shapes: cluster (Temporal's own server: frontend, 2 history, 2 matching, worker; PostgreSQL 15; namespace stupa) ` +
      `vs dev (the CLI's dev server on SQLite; namespace default); ${rounds} run(s) of each, alternating, dev first; medians; ` +
      `ratios cluster / dev; ${fixed((Date.now() - t) / 60_000)} min in all`,
    ratioLine(
      'start',
      runs,
      (r) => r.temporalStart,
      ' s',
      1,
      '  (the Temporal piece as stack.ts times it, started alongside FerretDB and Kubo)',
    ),
    ratioLine('stack start', runs, (r) => r.stackStart, ' s', 1, '  (the whole startStack)'),
    ratioLine('empty wf/s', runs, (r) => r.emptyPerSecond, '/s', 1, `  (${PIN_COUNT} executions, ${CONCURRENCY} at a time)`),
    ratioLine(
      'pins/s',
      runs,
      (r) => r.pinsPerSecond,
      '/s',
      1,
      `  (${PIN_COUNT} local blocks, ${CONCURRENCY} at a time, POST /pin until pinned; workflows: ${runs.map((r) => r.pinWorkflows).join(', ')}` +
        `; 5xx: ${runs.reduce((n, r) => n + r.pinServerErrors, 0)}${noPinWorkflows})`,
    ),
    ratioLine(
      'small uploads/s',
      runs,
      (r) => r.smallPerSecond,
      '/s',
      1,
      `  (${SHAPE_SMALL_FILES} JSON files of 1 KiB, ${CLIENTS} clients; kubo add: ${runs.map((r) => `${r.shape} ${fixed(r.kuboAddPerSecond)}`).join(', ')}` +
        `; 503s: ${runs.reduce((n, r) => n + r.smallBusy, 0)})`,
    ),
    ratioLine(
      'cpu ms/pin',
      runs,
      (r) => cpu(r.cpuPerPin),
      ' ms',
      2,
      `${clusterCpu((r) => r.cpuPerPin)}${noPinWorkflows ? '  (no pin took a workflow)' : ''}`,
    ),
    ratioLine(
      'cpu ms/empty wf',
      runs,
      (r) => cpu(r.cpuPerEmpty),
      ' ms',
      2,
      clusterCpu((r) => r.cpuPerEmpty),
    ),
    `bench: one run on one machine: ${os.cpus().length} cores, load average ${loadStart} at start, ${fixed(os.loadavg()[0]!)} at end ` +
      `(other processes share it; compare runs with care)`,
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
  const restarts = runs.reduce((n, r) => n + r.restarts, 0);
  if (restarts > 0) say(`temporal shapes: the cluster's processes were started again ${restarts} times during the runs`);
  for (const r of runs) {
    for (const e of r.logErrors) say(`${r.keptLogs}/${e.file}: ${e.count} error lines; the first: ${e.first}`);
  }
  say(`temporal shapes: the runs' logs are in ${keepRoot}`);
  return 0;
}
