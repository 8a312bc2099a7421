// Benchmark 3: `GET /pin/:cid` under 100 concurrent connections, against a bare Express app
// answering a small JSON on the same machine with the same load.
//
// autocannon runs in a worker thread (`workers: 1`): the bare app lives in this process, and
// a load generator on the same event loop would steal its time. With one thread each way,
// both targets face the same client and the same share of the machine's two cores.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';

export const CONNECTIONS = 100;
export const DURATION_S = 10;

export interface LoadResult {
  p50: number;
  p99: number;
  requestsPerSecond: number;
  /** Answers that were not 2xx, errors and timeouts: any of these makes the figures suspect. */
  bad: number;
  /** Answers by status code, e.g. `200: 9000, 500: 12`. */
  statuses: string;
}

async function load(url: string, headers: Record<string, string>, duration = DURATION_S): Promise<LoadResult> {
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

/** Express with one handler and nothing else: what Node and Express cost per request here. */
async function startBareExpress(): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.get('/pin/:cid', (req, res) => {
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

export async function benchLatency(
  t: { apiUrl: string; apiKey: string; cid: string; say: (line: string) => void },
  track: (close: () => Promise<void>) => void,
): Promise<{ api: LoadResult; bare: LoadResult }> {
  const path = `/pin/${t.cid}`;
  const check = await fetch(`${t.apiUrl}${path}`, { headers: { 'X-Api-Key': t.apiKey } });
  const text = await check.text();
  if (check.status !== 200) throw new Error(`GET ${path} answered ${check.status}: ${text.slice(0, 300)}`);
  const headers = { 'X-Api-Key': t.apiKey };

  // Each target first gets a 2 s pass that is thrown away: JIT, connection pools and
  // MongoDB's caches warm up there, so the measured pass is steady state.
  t.say(`latency: GET /pin/:cid, ${CONNECTIONS} connections, 2 s warm-up + ${DURATION_S} s`);
  await load(`${t.apiUrl}${path}`, headers, 2);
  const api = await load(`${t.apiUrl}${path}`, headers);

  const bare = await startBareExpress();
  track(bare.close);
  t.say(`latency: bare Express, ${CONNECTIONS} connections, 2 s warm-up + ${DURATION_S} s`);
  await load(`${bare.url}${path}`, headers, 2);
  const bareResult = await load(`${bare.url}${path}`, headers);
  await bare.close();
  return { api, bare: bareResult };
}
