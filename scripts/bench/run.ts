// `npm run bench`: how much the service costs over the components it is built on, from one
// run on one machine. An isolated stack (free ports, a temporary directory, as `npm test`
// starts it), the API and a worker as their own processes, a user made with the admin CLI
// (harness.ts); then three benchmarks, each a ratio against the raw component:
//   upload.ts   1 GiB through POST /upload/new vs Kubo's own /api/v0/add, rounds alternating,
//               with the API's CPU s/GiB and RSS (`--upload` runs only this one)
//   small.ts    1,000 JSON files of 1 KiB from 16 clients into one empty account vs Kubo's add
//               of as many, and the 503s (`--small`)
//   pins.ts     pins/s end to end vs executions/s of an empty Temporal workflow (`--pins`)
//   latency.ts  GET /pin/:cid and GET /file/:cid under 100 connections vs a bare Express app
//               (`--status`; `--hot` runs upload, small and status; `--rounds N` sets their rounds,
//               `--upload-client curl|node` the upload's client, curl by default)
//   snapshot.ts a 10,000-file folder's snapshot vs ipfs add -r of the same tree
//   images.ts   GET /image/:cid cold vs raw sharp on the same image, and warm vs cold
//               (`--images` runs only this one)
//   ipns.ts     publishes/s vs ipfs name publish; names one worker keeps republished
//               (`--ipns [--names N]` runs only this one, with 10,000 names by default)
//   analytics.ts GET /analytics over a year of a user with a million events, and the rate
//               events are recorded at (`--analytics` runs only this one)
//   gateway.ts  1 GiB and 4 KiB (32 clients) reads through an account's gateway vs Kubo's own
//               gateway, and the API's RSS (`--gateway` runs only this one)
//   edge.ts     the same reads through the edge (Caddy; bytes from Kubo's gateway, the API
//               deciding), on shared cores and with Kubo on a core of its own (`--edge`)
//   s3.ts       4 KiB PutObject/GetObject at 16 clients vs MinIO (s3-small.ts, `--s3-small`),
//               1 GiB PutObject vs the REST upload, CompleteMultipartUpload of 5 GiB in 8 MiB
//               parts (`--s3` runs only this one)
//   webhooks.ts 10,000 deliveries to 100 endpoints on a loopback receiver (deliveries/s), and
//               the API's small-upload rate with webhooks on vs off (`--webhooks`)
//   file-ids.ts migration 1 in the background over a million files from before file ids: its
//               rate, the API's latency during it vs idle, and what a legacy user's first request
//               waits for mid-migration (`--migrate [--records N]` runs only this one)
//   temporal-shape.ts Temporal's production shape vs its dev server, a stack each, alternating (`--temporal [--rounds N]`)
//   backup.ts   the local stack's backup and restore at 100,000 files, each store's time and bytes,
//               against cp -r of the data directory (`--backup [--files N]`, a stack of its own)
// `npm run bench -- --scale [flags]` runs scale.ts instead, on the same harness: the service
// with a million records. Goals missed are reported, not failures: exit 0 when it ran,
// non-zero when something broke. Everything started is stopped, and the directory removed,
// on every path.
import os from 'node:os';
import { analyticsLine, benchAnalytics } from './analytics.js';
import { BACKUP_FILES, backupLines, benchBackup } from './backup.js';
import { benchFileIds, MIGRATE_RECORDS } from './file-ids.js';
import { benchEdge, edgeBroken, edgeLines } from './edge.js';
import {
  benchGateway,
  CONNECTIONS as GATEWAY_CONNECTIONS,
  LOAD_ROUNDS,
  LOAD_SECONDS,
  METER_ROUNDING_BYTES,
  READ_ROUNDS,
  type GatewayResult,
} from './gateway.js';
import { apiOperations, runBench, say, type BenchContext } from './harness.js';
import { s3Only, s3SmallOnly } from './s3.js';
import { benchImages, IMAGE_HEIGHT, IMAGE_WIDTH, REQUESTS as IMAGE_REQUESTS, ROUNDS as IMAGE_ROUNDS, type ImagesResult } from './images.js';
import { benchIpns, ipnsLines } from './ipns.js';
import { hotPathsBroken, smallLine, statusLine, uploadLine } from './hot-paths.js';
import { benchStatus } from './latency.js';
import { benchEmptyWorkflow, benchPins, CONCURRENCY, PIN_COUNT, type PinsResult } from './pins.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { readStackFile } from '../../stack/stack-file.js';
import { benchScale, parseScaleArgs } from './scale.js';
import { benchScaleOut, scaleOutLines } from './scale-out.js';
import { benchSnapshot, SNAPSHOT_DIRS, SNAPSHOT_FILE_BYTES, type SnapshotResult } from './snapshot.js';
import { benchSmallFiles } from './small.js';
import { benchTemporalShapes, SHAPE_ROUNDS } from './temporal-shape.js';
import { benchUpload, type UploadClient } from './upload.js';
import { benchWebhooks, webhooksBroken, webhooksLines } from './webhooks.js';

const fixed = (n: number, digits = 1) => n.toFixed(digits);
const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
const verdict = (met: boolean) => (met ? 'met' : 'MISSED');

/** Pins against empty workflows: the small-operations issue asks 0.9 (the first goal was 0.5). */
const PIN_GOAL = 0.9;

function pinsLine(pins: PinsResult, empty: number, cpu: { pins: string; empty: string }, operations: string): string {
  const pinRatio = pins.pinsPerSecond / empty;
  return (
    `bench: pins/s         api ${fixed(pins.pinsPerSecond)}  empty workflow ${fixed(empty)}  ratio ${fixed(pinRatio, 2)} ` +
    `(goal >= ${PIN_GOAL}: ${verdict(pinRatio >= PIN_GOAL)})  [1,000 each, ${CONCURRENCY} at a time; ` +
    `${pins.workflows} pins took a workflow, the others were pinned by their POST` +
    `${pins.serverErrors > 0 ? `; ${pins.serverErrors} POST /pin answered 5xx and were retried` : ''}]  ` +
    `[cpu ms per pin: ${cpu.pins}; per empty workflow: ${cpu.empty}]  [MongoDB operations per pin from the API: ${operations}]`
  );
}

// Other work on a shared machine moves these figures (measured here: the empty workflow
// rate went from 27/s to 11/s between two runs), so the load is printed with them.
const machineLine = (loadStart: string) =>
  `bench: one run on one machine: ${os.cpus().length} cores, load average ${loadStart} at start, ${fixed(os.loadavg()[0]!)} at end ` +
  `(other processes share it; compare runs with care)`;

/** The hot paths alone (`--upload`, `--small`, `--status`, or `--hot` for the three). */
interface HotPaths {
  upload: boolean;
  small: boolean;
  status: boolean;
  rounds?: number;
  client?: UploadClient;
}

async function hotPaths(ctx: BenchContext, which: HotPaths): Promise<number> {
  const upload = which.upload ? await benchUpload(ctx, say, which.rounds, which.client) : undefined;
  const small = which.small ? await benchSmallFiles(ctx, say, which.rounds) : undefined;
  const status = which.status ? await benchStatus(ctx, say, which.rounds) : undefined;
  const lines = [
    ...(upload ? [uploadLine(upload)] : []),
    ...(small ? [smallLine(small)] : []),
    ...(status ? [statusLine(status)] : []),
    machineLine(ctx.loadStart),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
  const broken = hotPathsBroken(upload, status);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

/** 1,000 pins end to end, then 1,000 empty workflows the same way, with the CPU each process spent per one. */
async function pinsAndEmpty(ctx: BenchContext) {
  const { endpoints, apiUrl, user, signal } = ctx;
  const stack = readStackFile(ctx.dataDir).pids ?? {};
  const pids = {
    api: ctx.api.pid,
    worker: ctx.worker.pid,
    bench: process.pid,
    temporal: stack.temporal,
    ferretdb: stack.ferretdb,
    kubo: stack.kubo,
    cluster: stack.cluster,
  };
  const perOne = async <T>(work: () => Promise<T>) => {
    const before = Object.entries(pids).map(([k, pid]) => [k, pid ? cpuTicks(pid) : 0] as const);
    const result = await work();
    const ms = before.map(
      ([k, t]) => `${k} ${fixed((((cpuTicks(pids[k as keyof typeof pids]!) - t) / TICKS_PER_SECOND) * 1000) / PIN_COUNT, 2)}`,
    );
    return { result, cpu: ms.join(', ') };
  };
  const sentBefore = await apiOperations(apiUrl);
  const pins = await perOne(() => benchPins({ ...endpoints, apiUrls: [apiUrl], apiKey: user.apiKey, userId: user.userId, say }, signal));
  const sent = [...(await apiOperations(apiUrl))]
    .map(([k, n]): [string, number] => [k, (n - (sentBefore.get(k) ?? 0)) / PIN_COUNT])
    .filter(([, n]) => n >= 0.005)
    .sort((a, b) => b[1] - a[1]);
  const operations = `${fixed(
    sent.reduce((t, [, n]) => t + n, 0),
    2,
  )}: ${sent.map(([k, n]) => `${k} ${fixed(n, 2)}`).join(', ')}`;
  say(
    `pins: ${fixed(pins.result.pinsPerSecond)}/s (POSTs took ${fixed(pins.result.postSeconds)} s, all pinned after ${fixed(pins.result.totalSeconds)} s)`,
  );
  say(`empty workflow: 1,000 executions, ${CONCURRENCY} at a time`);
  const empty = await perOne(() => benchEmptyWorkflow(endpoints.temporalAddress, signal, endpoints.temporalNamespace));
  say(`empty workflow: ${fixed(empty.result.perSecond)}/s (${fixed(empty.result.seconds)} s)`);
  say(`cpu ms per pin: ${pins.cpu}; per empty workflow: ${empty.cpu} (bench: this process, the empty workflows' worker and client)`);
  return { pins: pins.result, empty: empty.result, cpu: { pins: pins.cpu, empty: empty.cpu }, operations };
}

/** `npm run bench -- --pins`: the pins figure alone. */
async function pinsOnly(ctx: BenchContext): Promise<number> {
  const { pins, empty, cpu, operations } = await pinsAndEmpty(ctx);
  process.stdout.write(`\n${pinsLine(pins, empty.perSecond, cpu, operations)}\n${machineLine(ctx.loadStart)}\n`);
  return 0;
}

/** The default benchmark: every figure, each against its raw component. */
async function costOverComponents(ctx: BenchContext): Promise<number> {
  const { loadStart } = ctx;
  const upload = await benchUpload(ctx, say);
  const small = await benchSmallFiles(ctx, say);

  const { pins, empty, cpu, operations } = await pinsAndEmpty(ctx);

  const status = await benchStatus(ctx, say);

  const snapshot = await benchSnapshot(ctx, say);
  const ipns = await benchIpns(ctx, DEFAULT_RUN_NAMES, say);
  const images = await benchImages(ctx, say);
  const analytics = await benchAnalytics(ctx, say);
  const gateway = await benchGateway(ctx, say);
  const edge = await benchEdge(ctx, say);
  const webhooks = await benchWebhooks(ctx, say);
  const lines = [
    uploadLine(upload),
    smallLine(small),
    pinsLine(pins, empty.perSecond, cpu, operations),
    statusLine(status),
    machineLine(loadStart),
    snapshotLine(snapshot),
    ...ipnsLines(ipns),
    imagesLine(images),
    analyticsLine(analytics),
    ...gatewayLines(gateway),
    ...edgeLines(edge),
    ...webhooksLines(webhooks),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
  // Slow is reported, not failed; wrong is a failure. 5xx answers are in the summary.
  const broken = [
    ...hotPathsBroken(upload, status),
    ...(snapshot.sameCid ? [] : ['the snapshot and ipfs add -r gave different CIDs for the same tree']),
    ...imagesBroken(images),
    ...(analytics.correct ? [] : ['GET /analytics did not count the uploads recorded']),
    ...gatewayBroken(gateway),
    ...edgeBroken(edge),
    ...webhooksBroken(webhooks),
  ];
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

/** The snapshot figure: faster than `ipfs add -r` of the same tree (goal), with the same CID. */
function snapshotLine(r: SnapshotResult): string {
  const ratio = r.snapshotSeconds / r.addSeconds;
  return (
    `bench: snapshot       ${r.files.toLocaleString('en')} files in ${SNAPSHOT_DIRS} folders (${SNAPSHOT_FILE_BYTES / 1024} KiB each): ` +
    `${fixed(r.snapshotSeconds)} s (built, recorded, pinned) vs ipfs add -r ${fixed(r.addSeconds)} s  ratio ${fixed(ratio, 2)} ` +
    `(goal < 1: ${verdict(ratio < 1)})  cid ${r.sameCid ? 'same as ipfs add -r' : 'DIFFERS from ipfs add -r'}`
  );
}

async function snapshotOnly(ctx: BenchContext): Promise<number> {
  const result = await benchSnapshot(ctx, say);
  process.stdout.write(`\n${snapshotLine(result)}\n`);
  return result.sameCid ? 0 : 1;
}

/** The image figures: cold against raw sharp, warm against cold, and that warm did no image work. */
function imagesLine(r: ImagesResult): string {
  const coldRatio = r.coldPerSecond / r.rawPerSecond;
  const warmRatio = r.warmPerSecond / r.coldPerSecond;
  return (
    `bench: GET /image     ${IMAGE_WIDTH}x${IMAGE_HEIGHT} JPEG -> WebP q80 (~800 px wide), ${r.concurrency} at a time: cold ${fixed(r.coldPerSecond)}/s ` +
    `vs raw sharp ${fixed(r.rawPerSecond)}/s  ratio ${fixed(coldRatio, 2)} (goal >= 0.9: ${verdict(coldRatio >= 0.9)})  ` +
    `warm ${Math.round(r.warmPerSecond)}/s  ${fixed(warmRatio)}x cold (goal >= 10: ${verdict(warmRatio >= 10)})  ` +
    `[${IMAGE_ROUNDS} rounds of ${IMAGE_REQUESTS} each, alternating; warm: ${r.warmTransforms} transforms, ${r.warmMisses} misses]`
  );
}

/** Wrong, not slow: answers that failed, or warm requests that did image work. */
function imagesBroken(r: ImagesResult): string[] {
  return [
    ...(r.failures > 0 ? [`${r.failures} GET /image answers were not 200`] : []),
    ...(r.warmTransforms > 0 || r.warmMisses > 0
      ? ['warm GET /image requests were transformed again instead of served from the cache']
      : []),
  ];
}

async function imagesOnly(ctx: BenchContext): Promise<number> {
  const result = await benchImages(ctx, say);
  process.stdout.write(`\n${imagesLine(result)}\n`);
  const broken = imagesBroken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

async function analyticsOnly(ctx: BenchContext): Promise<number> {
  const result = await benchAnalytics(ctx, say);
  process.stdout.write(`\n${analyticsLine(result)}\n`);
  return result.correct ? 0 : 1;
}

/** The gateway figures: 1 GiB MB/s and 4 KiB req/s against Kubo's own gateway, and the API's RSS. */
function gatewayLines(r: GatewayResult): string[] {
  const readRatio = r.gatewayMBps / r.kuboMBps;
  const { gateway: g, kubo: k } = r.small;
  const smallRatio = g.requestsPerSecond / k.requestsPerSecond;
  return [
    `bench: gateway 1 GiB  gateway ${fixed(r.gatewayMBps)} MB/s  kubo gateway ${fixed(r.kuboMBps)} MB/s (${READ_ROUNDS} rounds each, alternating; ` +
      `bytes over summed time)  ratio ${fixed(readRatio, 2)} (goal >= 0.9: ${verdict(readRatio >= 0.9)})  api rss ${mb(r.rssBefore)} -> ` +
      `${mb(r.rssPeak)} MB (peak${r.peakIsOfReads ? ' of the reads' : ' since start'}), ${mb(r.rssPeakSmall)} MB (peak of the 4 KiB reads)  ` +
      `metered ${mb(r.metered)} of ${mb(r.readThrough)} MB read` +
      `${r.cpuPerGiB ? `  cpu s/GiB: api ${fixed(r.cpuPerGiB.gateway.api, 2)}, kubo ${fixed(r.cpuPerGiB.kubo.kubo, 2)}` : ''}`,
    `bench: gateway 4 KiB  ${GATEWAY_CONNECTIONS} connections: gateway ${Math.round(g.requestsPerSecond)} req/s p50 ${g.p50} ms p99 ${g.p99} ms  ` +
      `kubo gateway ${Math.round(k.requestsPerSecond)} req/s p50 ${k.p50} ms p99 ${k.p99} ms  ratio ${fixed(smallRatio, 2)} ` +
      `(goal >= 0.8: ${verdict(smallRatio >= 0.8)})  [${LOAD_ROUNDS} rounds of ${LOAD_SECONDS} s each, alternating; req/s over summed time, ` +
      `latencies the rounds' median; not 2xx: gateway ${g.bad}, kubo ${k.bad}]`,
  ];
}

/** Wrong, not slow: bytes that were not the uploaded ones, content served that the account does not hold, bytes not counted. */
function gatewayBroken(r: GatewayResult): string[] {
  return [
    ...(r.sameBytes ? [] : ['a 1 GiB read (gateway or Kubo) did not give the uploaded bytes']),
    ...(r.refusesUnheld ? [] : ['the gateway did not answer 410 for content its account does not hold']),
    ...(r.metered >= r.readThrough - METER_ROUNDING_BYTES && r.metered <= r.readThrough + r.unfinished + METER_ROUNDING_BYTES
      ? []
      : [
          `the gateway counted ${r.metered} bytes against the account for ${r.readThrough} read through it (+ up to ${r.unfinished} in flight)`,
        ]),
    ...(r.small.gateway.bad > 0 ? [`${r.small.gateway.bad} gateway 4 KiB answers were not 2xx (${r.small.gateway.statuses})`] : []),
    ...(r.small.kubo.bad > 0 ? [`${r.small.kubo.bad} Kubo gateway 4 KiB answers were not 2xx (${r.small.kubo.statuses})`] : []),
  ];
}

async function edgeOnly(ctx: BenchContext): Promise<number> {
  const result = await benchEdge(ctx, say);
  process.stdout.write(`\n${[...edgeLines(result), machineLine(ctx.loadStart)].join('\n')}\n`);
  const broken = edgeBroken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

async function gatewayOnly(ctx: BenchContext): Promise<number> {
  const result = await benchGateway(ctx, say);
  process.stdout.write(`\n${[...gatewayLines(result), machineLine(ctx.loadStart)].join('\n')}\n`);
  const broken = gatewayBroken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

/** Names in the IPNS figure of the default run, and of `--ipns` without `--names`. */
const DEFAULT_RUN_NAMES = 1_000;
const IPNS_ONLY_NAMES = 10_000;

async function ipnsOnly(ctx: BenchContext, names: number): Promise<number> {
  const result = await benchIpns(ctx, names, say);
  process.stdout.write(`\n${ipnsLines(result).join('\n')}\n`);
  return 0;
}

async function webhooksOnly(ctx: BenchContext): Promise<number> {
  const result = await benchWebhooks(ctx, say);
  process.stdout.write(`\n${webhooksLines(result).join('\n')}\n${machineLine(ctx.loadStart)}\n`);
  const broken = webhooksBroken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--rounds');
  const rounds = at >= 0 ? Number(args[at + 1]) : undefined;
  if (rounds !== undefined && !(Number.isInteger(rounds) && rounds > 0)) throw new Error('--rounds takes a positive whole number');
  const clientAt = args.indexOf('--upload-client');
  const client = clientAt >= 0 ? args[clientAt + 1] : undefined;
  if (client !== undefined && client !== 'curl' && client !== 'node') throw new Error('--upload-client takes curl or node');
  const hot: HotPaths = {
    upload: args.includes('--upload'),
    small: args.includes('--small'),
    status: args.includes('--status'),
    rounds,
    client,
  };
  if (args.includes('--scale-out')) {
    return runBench(async (ctx) => {
      process.stdout.write(`\n${scaleOutLines(await benchScaleOut(ctx, say)).join('\n')}\n`);
      return 0;
    });
  }
  if (args.includes('--scale')) {
    // First: its own flags include --pins N. Checked before anything starts: a typo costs no stack.
    const options = parseScaleArgs(args.filter((a) => a !== '--scale'));
    return runBench((ctx) => benchScale(ctx, options));
  }
  if (args.includes('--temporal')) return benchTemporalShapes(rounds ?? SHAPE_ROUNDS, say);
  if (args.includes('--backup')) {
    const at = args.indexOf('--files');
    const files = at >= 0 ? Number(args[at + 1]) : BACKUP_FILES;
    if (!Number.isInteger(files) || files < 100) throw new Error('--files takes a whole number of at least 100');
    const loadStart = os.loadavg()[0]!.toFixed(1);
    const result = await benchBackup(files, say);
    process.stdout.write(`\n${[...backupLines(result), machineLine(loadStart)].join('\n')}\n`);
    for (const problem of result.broken) say(`broken: ${problem}`);
    return result.broken.length > 0 ? 1 : 0;
  }
  if (args.includes('--hot')) hot.upload = hot.small = hot.status = true;
  if (hot.upload || hot.small || hot.status) return runBench((ctx) => hotPaths(ctx, hot));
  if (args.includes('--snapshot')) return runBench(snapshotOnly);
  if (args.includes('--pins')) return runBench(pinsOnly);
  if (args.includes('--migrate')) {
    const at = args.indexOf('--records');
    const records = at >= 0 ? Number(args[at + 1]) : MIGRATE_RECORDS;
    if (!Number.isInteger(records) || records < 1) throw new Error('--records takes a positive whole number');
    return runBench((ctx) => benchFileIds(ctx, say, records));
  }
  if (args.includes('--analytics')) return runBench(analyticsOnly);
  if (args.includes('--images')) return runBench(imagesOnly);
  if (args.includes('--gateway')) return runBench(gatewayOnly);
  if (args.includes('--edge')) return runBench(edgeOnly);
  if (args.includes('--webhooks')) return runBench(webhooksOnly);
  if (args.includes('--s3-small')) return runBench((ctx) => s3SmallOnly(ctx, say, rounds));
  if (args.includes('--s3')) return runBench((ctx) => s3Only(ctx, say));
  if (args.includes('--ipns')) {
    const named = args.indexOf('--names');
    const names = named >= 0 ? Number(args[named + 1]) : IPNS_ONLY_NAMES;
    if (!Number.isInteger(names) || names < 1) throw new Error('--names takes a positive whole number');
    return runBench((ctx) => ipnsOnly(ctx, names));
  }
  return runBench(costOverComponents);
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    say(err.message);
    process.exit(1);
  },
);
