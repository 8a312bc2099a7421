// Benchmark: the status reads clients poll, `GET /pin/:cid` and `GET /file/:cid`, under 100
// concurrent connections, against a bare Express app answering a small JSON on the same
// machine with the same load. STATUS_ROUNDS rounds, each running the three targets once in an
// order that rotates; each round's ratios are of its own runs (the same moment of a shared
// machine), and the figure is their spread (min/median/max), with p99 beside the bare app's.
//
// autocannon runs in a worker thread (`workers: 1`): the bare app lives in this process, and
// a load generator on the same event loop would steal its time. With one thread each way,
// every target faces the same client and the same share of the machine's two cores.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { apiCall, type BenchContext } from './harness.js';
import { spread, type Spread } from './spread.js';

export const CONNECTIONS = 100;
export const STATUS_SECONDS = 5;
export const STATUS_ROUNDS = 3;

export interface LoadResult {
  p50: number;
  p99: number;
  requestsPerSecond: number;
  /** Answers that were not 2xx, errors and timeouts: any of these makes the figures suspect. */
  bad: number;
  /** Answers by status code, e.g. `200: 9000, 500: 12`. */
  statuses: string;
}

type Target = 'pin' | 'file' | 'bare';

export interface StatusFigures {
  /** req/s over the rounds, and the ratio to bare Express's of the same round. */
  perSecond: Spread;
  ratio: Spread;
  /** p99 ms over the rounds, and its ratio to bare Express's of the same round. */
  p99: Spread;
  p99Ratio: Spread;
  bad: number;
  statuses: string;
}

export interface StatusResult {
  pin: StatusFigures;
  file: StatusFigures;
  bare: { perSecond: Spread; p99: Spread; bad: number };
  /** The API process's CPU ms per request, by route. */
  apiCpuMs: { pin: number; file: number };
  rounds: number;
}

async function load(url: string, headers: Record<string, string>, duration = STATUS_SECONDS): Promise<LoadResult> {
  const result = await autocannon({ url, headers, connections: CONNECTIONS, duration, workers: 1 });
  return {
    p50: result.latency.p50,
    p99: result.latency.p99,
    requestsPerSecond: result.requests.average,
    bad: result.non2xx + result.errors + result.timeouts,
    statuses: [
      ...Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => `${code}: ${count}`),
      ...(result.errors > 0 ? [`errors: ${result.errors}`] : []),
      ...(result.timeouts > 0 ? [`timeouts: ${result.timeouts}`] : []),
    ].join(', '),
  };
}

/** Express with one handler a path and nothing else: what Node and Express cost per request here. */
async function startBareExpress(): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.get('/:kind/:cid', (req, res) => {
    res.json({ cid: req.params.cid, status: 'pinned', size: 42 });
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  // Called by the benchmark and again by the bench's cleanup: one close however often.
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }));
  return { url: `http://127.0.0.1:${port}`, close };
}

/** A pin of local content, awaited `pinned`, and an uploaded file: what the reads read. */
async function readTargets(ctx: BenchContext): Promise<{ pin: string; file: string }> {
  const kubo = createKubo(ctx.endpoints.kuboApiUrl);
  const block = await kubo.add(`stupa bench status ${Date.now()}\n`, { cidVersion: 1, rawLeaves: true, pin: false });
  const pin = block.cid.toString();
  await apiCall(ctx, 'POST', '/pin', { cid: pin });
  for (let tries = 0; (await apiCall<{ status: string }>(ctx, 'GET', `/pin/${pin}`)).status !== 'pinned'; tries++) {
    if (tries > 600) throw new Error(`the bench's pin ${pin} was not pinned within a minute`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const file = await apiCall<{ cid: string }>(ctx, 'POST', '/upload/new', { content: { bench: 'status', at: Date.now() } });
  return { pin, file: file.cid };
}

function figures(runs: LoadResult[], bare: LoadResult[]): StatusFigures {
  return {
    perSecond: spread(runs.map((r) => r.requestsPerSecond)),
    ratio: spread(runs.map((r, i) => r.requestsPerSecond / bare[i]!.requestsPerSecond)),
    p99: spread(runs.map((r) => r.p99)),
    p99Ratio: spread(runs.map((r, i) => r.p99 / bare[i]!.p99)),
    bad: runs.reduce((n, r) => n + r.bad, 0),
    statuses: [...new Set(runs.map((r) => r.statuses))].join('; '),
  };
}

export async function benchStatus(ctx: BenchContext, say: (line: string) => void, rounds = STATUS_ROUNDS): Promise<StatusResult> {
  const cids = await readTargets(ctx);
  const bare = await startBareExpress();
  ctx.track(bare.close);
  const headers = { 'X-Api-Key': ctx.user.apiKey };
  const urls: Record<Target, string> = {
    pin: `${ctx.apiUrl}/pin/${cids.pin}`,
    file: `${ctx.apiUrl}/file/${cids.file}`,
    bare: `${bare.url}/pin/${cids.pin}`,
  };
  // Each target first gets a 2 s pass that is thrown away: JIT, connection pools and
  // MongoDB's caches warm up there, so the measured passes are steady state.
  say(`status reads: ${CONNECTIONS} connections, 2 s warm-up each, then ${rounds} rounds of ${STATUS_SECONDS} s per target`);
  for (const target of ['pin', 'file', 'bare'] as const) await load(urls[target], headers, 2);

  const runs: Record<Target, LoadResult[]> = { pin: [], file: [], bare: [] };
  const apiTicks = { pin: 0, file: 0 };
  const requests = { pin: 0, file: 0 };
  const rotations: Target[][] = [
    ['bare', 'pin', 'file'],
    ['pin', 'file', 'bare'],
    ['file', 'bare', 'pin'],
  ];
  for (let round = 0; round < rounds; round++) {
    for (const target of rotations[round % rotations.length]!) {
      ctx.signal.throwIfAborted();
      const before = cpuTicks(ctx.api.pid!);
      const r = await load(urls[target], headers);
      if (target !== 'bare') {
        apiTicks[target] += cpuTicks(ctx.api.pid!) - before;
        requests[target] += r.requestsPerSecond * STATUS_SECONDS;
      }
      runs[target].push(r);
    }
    say(
      `status reads: round ${round + 1}: GET /pin ${Math.round(runs.pin[round]!.requestsPerSecond)} req/s p99 ${runs.pin[round]!.p99} ms, ` +
        `GET /file ${Math.round(runs.file[round]!.requestsPerSecond)} req/s p99 ${runs.file[round]!.p99} ms, ` +
        `bare ${Math.round(runs.bare[round]!.requestsPerSecond)} req/s p99 ${runs.bare[round]!.p99} ms`,
    );
  }
  await bare.close();
  const msPer = (t: keyof typeof apiTicks) => ((apiTicks[t] / TICKS_PER_SECOND) * 1000) / Math.max(1, requests[t]);
  return {
    pin: figures(runs.pin, runs.bare),
    file: figures(runs.file, runs.bare),
    bare: {
      perSecond: spread(runs.bare.map((r) => r.requestsPerSecond)),
      p99: spread(runs.bare.map((r) => r.p99)),
      bad: runs.bare.reduce((n, r) => n + r.bad, 0),
    },
    apiCpuMs: { pin: msPer('pin'), file: msPer('file') },
    rounds,
  };
}
