// `npm run bench -- --scale-out`: what a second API process adds on this
// machine, and how long Cluster takes to restore replication after a peer's loss.
// - Small uploads (1 KiB JSON, 16 clients, one account per run) through one API process, then
//   spread over two on the same database (clients alternate between them); rounds alternate
//   which shape goes first.
// - Pins of local content (POST /pin, 50 at a time, each pinned by its POST: core/pins.ts)
//   through one API process, then spread over two.
// - Replication: a stack of three Kubo + Cluster peers (CRDT, repinning on, pings every 5 s, as
//   `STACK_PEERS=3` runs it); N pins with replication factor 2, allocated to the first peer and
//   one other; then the second peer is killed with SIGKILL, and the clock runs until no pin is
//   allocated to it and each live peer has pinned what it is allocated (N × 2 pins in all).
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { freePorts } from '../../stack/ports.js';
import { startApiProcess } from '../../stack/services.js';
import { startStack, type StackPeer } from '../../stack/stack.js';
import { createBenchUser } from './children.js';
import type { BenchContext } from './harness.js';
import { benchPins } from './pins.js';
import { metadata, runClients } from './small.js';
import { spread, showSpread, type Spread } from './spread.js';

const FILES = 1000;
const ROUNDS = 3;
const REPLICATION_PINS = [1_000, 10_000];

export interface ScaleOutResult {
  uploads: { one: Spread; two: Spread };
  pins: { one: number; two: number };
  replication: { pins: number; reallocatedS: number; restoredS: number }[];
}

async function upload(url: string, apiKey: string, doc: unknown, signal: AbortSignal): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    // Not given to fetch: thousands of requests would each leave a listener on the one signal.
    signal.throwIfAborted();
    const res = await fetch(`${url}/upload/new`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Api-Key': apiKey },
      body: JSON.stringify({ content: doc }),
    });
    const text = await res.text();
    if (res.status === 201) return;
    if (res.status !== 503 || attempt === 10) throw new Error(`POST /upload/new answered ${res.status}: ${text.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 1000 * Number(res.headers.get('retry-after') ?? 1)));
  }
}

/** Uploads per second with the clients spread over `urls`. */
async function uploadRate(ctx: BenchContext, urls: string[], seed: string): Promise<number> {
  const user = await createBenchUser(ctx.env);
  const docs = Array.from({ length: FILES }, (_, i) => metadata(seed, i));
  const seconds = await runClients(FILES, (i) => upload(urls[i % urls.length]!, user.apiKey, docs[i], ctx.signal));
  return FILES / seconds;
}

/** Lines of an NDJSON answer of a Cluster peer. */
async function ndjson<T>(url: string): Promise<T[]> {
  const text = await (await fetch(url, { signal: AbortSignal.timeout(120_000) })).text();
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

/** How many pins each peer's own Kubo has pinned, as the peer reports it. */
async function localPinned(peer: StackPeer): Promise<number> {
  return (await ndjson(`${peer.clusterApiUrl}/pins?local=true&filter=pinned`)).length;
}

async function replication(ctx: BenchContext, count: number, say: (line: string) => void) {
  const stack = await startStack({
    dataDir: path.join(ctx.dataDir, `peers-${count}`),
    ports: 'free',
    ui: false,
    peers: 3,
    external: { mongodbUri: ctx.endpoints.mongodbUri, temporalAddress: ctx.endpoints.temporalAddress },
    signal: ctx.signal,
  });
  try {
    const [first, victim] = stack.peers as [StackPeer, StackPeer, StackPeer];
    const live = stack.peers.filter((p) => p !== victim);
    const kubo = createKubo(first.kuboApiUrl);
    const run = crypto.randomBytes(8).toString('hex');
    const cids: string[] = [];
    const files = Array.from({ length: count }, (_, i) => ({ content: Buffer.from(`stupa scale-out ${run} ${i}\n`) }));
    for await (const added of kubo.addAll(files, { cidVersion: 1, rawLeaves: true, pin: false })) cids.push(added.cid.toString());
    // Half allocated to the first and second peers, half to the first and third: the second
    // peer's loss then moves half the pins.
    const limit = pLimit(50);
    const t0 = Date.now();
    await Promise.all(
      cids.map((cid, i) =>
        limit(async () => {
          const other = stack.peers[1 + (i % 2)]!.clusterPeerId;
          const q = `replication-min=2&replication-max=2&user-allocations=${first.clusterPeerId},${other}`;
          ctx.signal.throwIfAborted();
          const res = await fetch(`${first.clusterApiUrl}/pins/${cid}?${q}`, { method: 'POST' });
          if (!res.ok) throw new Error(`cluster pin answered ${res.status}: ${await res.text()}`);
        }),
      ),
    );
    for (;;) {
      const counts = await Promise.all(stack.peers.map(localPinned));
      if (counts.reduce((a, b) => a + b, 0) >= 2 * count) break;
      if (Date.now() - t0 > 20 * 60_000) throw new Error(`pins not all replicated after 20 minutes (${counts.join(', ')})`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    say(`replication: ${count} pins on two peers each in ${((Date.now() - t0) / 1000).toFixed(1)} s; killing the second peer`);

    const t = Date.now();
    process.kill(victim.pids.kubo, 'SIGKILL');
    process.kill(victim.pids.cluster, 'SIGKILL');
    let reallocatedS = 0;
    for (;;) {
      ctx.signal.throwIfAborted();
      if (!reallocatedS) {
        const pins = await ndjson<{ allocations?: string[] }>(`${first.clusterApiUrl}/allocations?filter=pin`);
        if (!pins.some((p) => p.allocations?.includes(victim.clusterPeerId))) reallocatedS = (Date.now() - t) / 1000;
      }
      if (reallocatedS) {
        const counts = await Promise.all(live.map(localPinned));
        if (counts.reduce((a, b) => a + b, 0) >= 2 * count) break;
      }
      if (Date.now() - t > 30 * 60_000) throw new Error('replication not restored after 30 minutes');
      await new Promise((r) => setTimeout(r, 1000));
    }
    const restoredS = (Date.now() - t) / 1000;
    say(`replication: ${count} pins: reallocated ${reallocatedS.toFixed(1)} s, restored ${restoredS.toFixed(1)} s after the kill`);
    return { pins: count, reallocatedS, restoredS };
  } finally {
    await stack.stop();
  }
}

export async function benchScaleOut(ctx: BenchContext, say: (line: string) => void): Promise<ScaleOutResult> {
  const [apiPort, gatewayPort, s3Port, reportPort] = await freePorts(4);
  const services = { logDir: path.join(ctx.dataDir, 'logs'), track: ctx.track, signal: ctx.signal };
  // Every port of its own, the edge's report port too (the bench readies the first for an edge).
  const ports = { API_PORT: apiPort, GATEWAY_PORT: gatewayPort, S3_PORT: s3Port, EDGE_REPORT_PORT: reportPort };
  await startApiProcess(
    { ...ctx.env, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])) },
    { ...services, name: 'api-2' },
  );
  const secondUrl = `http://127.0.0.1:${apiPort}`;
  const seed = crypto.randomBytes(6).toString('hex');
  // Warm-up of both processes, thrown away.
  await uploadRate(ctx, [ctx.apiUrl, secondUrl], `${seed}-warm`);
  const one: number[] = [];
  const two: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? ([1, 2] as const) : ([2, 1] as const);
    for (const n of order) {
      const rate = await uploadRate(ctx, n === 1 ? [ctx.apiUrl] : [ctx.apiUrl, secondUrl], `${seed}-${round}-${n}`);
      (n === 1 ? one : two).push(rate);
    }
    say(`uploads: round ${round}: one API ${one.at(-1)!.toFixed(1)}/s, two ${two.at(-1)!.toFixed(1)}/s`);
  }

  const pinsThrough = async (apiUrls: string[]) => {
    const user = await createBenchUser(ctx.env);
    const result = await benchPins({ ...ctx.endpoints, apiUrls, apiKey: user.apiKey, userId: user.userId, say }, ctx.signal);
    return result.pinsPerSecond;
  };
  const pinsOne = await pinsThrough([ctx.apiUrl]);
  const pinsTwo = await pinsThrough([ctx.apiUrl, secondUrl]);
  say(`pins: one API ${pinsOne.toFixed(1)}/s, two ${pinsTwo.toFixed(1)}/s`);

  const replicationResults = [];
  for (const count of REPLICATION_PINS) replicationResults.push(await replication(ctx, count, say));
  return { uploads: { one: spread(one), two: spread(two) }, pins: { one: pinsOne, two: pinsTwo }, replication: replicationResults };
}

export function scaleOutLines(r: ScaleOutResult): string[] {
  return [
    `Scale-out (${os.cpus().length} cores)`,
    `  1 KiB uploads, 16 clients: one API ${showSpread(r.uploads.one, 1)}/s, two APIs ${showSpread(r.uploads.two, 1)}/s (${(r.uploads.two.median / r.uploads.one.median).toFixed(2)}×)`,
    `  pins of local content, 50 at a time: one API ${r.pins.one.toFixed(1)}/s, two APIs ${r.pins.two.toFixed(1)}/s (${(r.pins.two / r.pins.one).toFixed(2)}×)`,
    ...r.replication.map(
      (x) =>
        `  a peer of three lost (factor 2, half the pins on it): ${x.pins} pins reallocated ${x.reallocatedS.toFixed(1)} s and replicated again ${x.restoredS.toFixed(1)} s after the kill`,
    ),
  ];
}
