// The gateway (api/gateway/): reads through an account's gateway against the same reads from
// the stack's Kubo gateway, which it proxies, on the same machine.
// 1. Throughput: a 1 GiB file the bench user uploaded, read whole (the bytes counted and
//    dropped) through `<slug>.localhost:<port>/ipfs/<cid>` and through Kubo's gateway, in
//    READ_ROUNDS rounds alternating which goes first; each path's MB/s is its bytes over its
//    summed time (both see the same bursts of other work on a shared machine). Goal: >= 0.9 of
//    Kubo's. The API process's peak RSS (VmHWM, reset first) over the gateway's reads, and the
//    CPU seconds a GiB costs the API process, Kubo and the reader on each path.
// 2. Small reads: a 4 KiB file under CONNECTIONS concurrent clients (autocannon), LOAD_ROUNDS
//    rounds of LOAD_SECONDS each way, alternating; req/s is requests over summed time, p50
//    and p99 the median of the rounds'. Goal: >= 0.8 of Kubo's req/s. CPU ms a request of the
//    API process, Kubo and FerretDB, and the API's peak RSS over these reads.
// Checked, not timed (wrong is a failure): one read of each path before the rounds hashes the
// bytes against those uploaded; the gateway refuses content the account does not hold (410)
// while Kubo serves it; the bytes the gateway counted against the account (GET /user/profile)
// are the bytes read through it, plus at most the 4 KiB answers in flight when a pass stopped.
// On two cores everything here shares the CPU, so each ratio is about Kubo's CPU a GiB (or a
// request) over the gateway path's (measured: 1.8 against 3.9 s a GiB, ratio 0.46).
import crypto from 'node:crypto';
import net from 'node:net';
import autocannon from 'autocannon';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { readStackFile } from '../../stack/stack-file.js';
import { bytes, MiB, multipart, postStream } from './content.js';
import { cpuTicks, procMemory, resetPeakMemory, TICKS_PER_SECOND } from './children.js';
import { apiCall, type BenchContext } from './harness.js';

export const READ_SIZE = 1024 * MiB;
export const SMALL_SIZE = 4 * 1024;
export const READ_ROUNDS = 4;
export const CONNECTIONS = 32;
export const LOAD_ROUNDS = 3;
export const LOAD_SECONDS = 5;

export interface LoadFigures {
  requestsPerSecond: number;
  /** Medians of the rounds' p50 and p99, ms. */
  p50: number;
  p99: number;
  /** Answers not 2xx, errors and timeouts, over all rounds. */
  bad: number;
  statuses: string;
}

export interface GatewayResult {
  gatewayMBps: number;
  kuboMBps: number;
  /** Each path's MB/s per round, in round order. */
  rounds: { gateway: number; kubo: number }[];
  /** The API process's RSS before the 1 GiB reads, its peak over them, and its peak over the small reads. */
  rssBefore: number;
  rssPeak: number;
  rssPeakSmall: number;
  peakIsOfReads: boolean;
  /** CPU seconds per GiB read: the API process, Kubo and this (the reader), by path. */
  cpuPerGiB?: { gateway: { api: number; kubo: number; reader: number }; kubo: { kubo: number; reader: number } };
  small: { gateway: LoadFigures; kubo: LoadFigures };
  /** Both paths' bytes were the uploaded bytes. */
  sameBytes: boolean;
  /** The gateway answered 410 for content the account does not hold (Kubo has it). */
  refusesUnheld: boolean;
  /** Bytes the gateway counted for the account, bytes this bench read through it, and at most
   * how many more it may have sent: 4 KiB answers in flight when a load pass stopped. */
  metered: number;
  readThrough: number;
  unfinished: number;
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** Uploads `size` bytes as the user; the CID and the bytes' SHA-256. */
export async function upload(ctx: BenchContext, size: number, seed: string): Promise<{ cid: string; sha256: string }> {
  const hash = crypto.createHash('sha256');
  async function* hashed() {
    for await (const chunk of bytes(size, seed)) {
      hash.update(chunk);
      yield chunk;
    }
  }
  const form = multipart(`gateway-${size}.bin`, hashed());
  const res = await postStream(`${ctx.apiUrl}/upload/new`, { 'Content-Type': form.contentType, 'X-Api-Key': ctx.user.apiKey }, form.body);
  if (res.status !== 201) throw new Error(`POST /upload/new answered ${res.status}: ${res.text.slice(0, 300)}`);
  return { cid: (JSON.parse(res.text) as { cid: string }).cid, sha256: hash.digest('hex') };
}

/** Waits for Cluster to pin the content, so no pinning runs during the timed reads. */
export async function awaitPinned(ctx: BenchContext, cid: string): Promise<void> {
  const cluster = createClusterClient(ctx.endpoints.clusterApiUrl);
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    ctx.signal.throwIfAborted();
    const info = await cluster.status(cid).catch(() => undefined);
    if (info && Object.values(info.peer_map).some((p) => p.status === 'pinned')) return;
    if (Date.now() > deadline) throw new Error(`${cid} was not pinned in Cluster within 5 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The reader's one receive buffer (reads are handled synchronously, so one is enough). */
const RECEIVE = Buffer.allocUnsafe(4 * MiB);

/**
 * GETs `url` whole on a connection of its own; the body's bytes are counted (and hashed if
 * asked) and dropped. A bare socket reading into one reused buffer, not node:http: the reader
 * shares the two cores with what it measures, and a fresh 64 KiB Buffer a read cost 2.2-2.4
 * CPU s a GiB here (node:http 1-5 s), this 0.5-0.6 s (Kubo direct then 930-995 MB/s, curl
 * 1,076). `Connection: close` and a Content-Length answer, as Kubo's gateway and the gateway
 * give for a file: the body ends with the connection.
 */
export function read(
  url: string,
  headers: Record<string, string>,
  hash?: crypto.Hash,
): Promise<{ status: number; bytes: number; seconds: number }> {
  const { hostname, port, pathname } = new URL(url);
  const started = performance.now();
  const lines = Object.entries({ Host: `${hostname}:${port}`, ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
  return new Promise((resolve, reject) => {
    let head: Buffer | null = Buffer.alloc(0);
    let status = 0;
    let length = -1;
    let body = 0;
    const take = (chunk: Buffer) => {
      body += chunk.length;
      hash?.update(chunk);
    };
    const received = (n: number, buffer: Uint8Array): boolean => {
      const chunk = Buffer.from(buffer.buffer, buffer.byteOffset, n);
      if (head === null) {
        take(chunk);
        return true;
      }
      head = Buffer.concat([head, chunk]); // a copy: the buffer is read into again
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return true;
      const text = head.subarray(0, end).toString('latin1');
      status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      length = Number(/^content-length:\s*(\d+)/im.exec(text)?.[1] ?? -1);
      if (/^transfer-encoding:/im.test(text)) socket.destroy(new Error(`${url} answered with a Transfer-Encoding, not a Content-Length`));
      const rest = head.subarray(end + 4);
      head = null;
      if (rest.length > 0) take(rest);
      return true;
    };
    const socket = net.connect({ host: hostname, port: Number(port), onread: { buffer: RECEIVE, callback: received } }, () =>
      socket.write(`GET ${pathname} HTTP/1.1\r\n${lines.join('')}Connection: close\r\n\r\n`),
    );
    socket.on('end', () => {
      const seconds = (performance.now() - started) / 1000;
      if (length >= 0 && body !== length) reject(new Error(`${url}: ${body} bytes of the ${length} announced`));
      else resolve({ status, bytes: body, seconds });
    });
    socket.on('error', reject);
  });
}

/** One autocannon pass; autocannon in this process (the targets are other processes). */
export async function load(url: string, headers: Record<string, string>, duration: number) {
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration });
  return {
    requests: r.requests.total,
    seconds: r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    bad: r.non2xx + r.errors + r.timeouts,
    statuses: new Map<string, number>([
      ...Object.entries(r.statusCodeStats ?? {}).map(([code, { count }]) => [code, count] as [string, number]),
      ...(r.errors > 0 ? [['errors', r.errors] as [string, number]] : []),
      ...(r.timeouts > 0 ? [['timeouts', r.timeouts] as [string, number]] : []),
    ]),
  };
}
export type Pass = Awaited<ReturnType<typeof load>>;

export function figures(passes: Pass[]): LoadFigures {
  const statuses = new Map<string, number>();
  for (const p of passes) for (const [k, v] of p.statuses) statuses.set(k, (statuses.get(k) ?? 0) + v);
  return {
    requestsPerSecond: passes.reduce((s, p) => s + p.requests, 0) / passes.reduce((s, p) => s + p.seconds, 0),
    p50: median(passes.map((p) => p.p50)),
    p99: median(passes.map((p) => p.p99)),
    bad: passes.reduce((s, p) => s + p.bad, 0),
    statuses: [...statuses].map(([k, v]) => `${k}: ${v}`).join(', '),
  };
}

/** GET /user/profile gives MB to 6 decimals: a byte or two either way of meteredBytes is its rounding. */
export const METER_ROUNDING_BYTES = 2;

export async function meteredBytes(ctx: BenchContext): Promise<number> {
  const profile = await apiCall<{ gatewayBandwidthUsedMB?: number }>(ctx, 'GET', '/user/profile');
  return Math.round((profile.gatewayBandwidthUsedMB ?? 0) * MiB);
}

export async function benchGateway(ctx: BenchContext, say: (line: string) => void): Promise<GatewayResult> {
  const seed = `bench-gateway-${Date.now()}`;
  const { gatewaySlug } = await apiCall<{ gatewaySlug?: string }>(ctx, 'GET', '/user/profile');
  if (!gatewaySlug) throw new Error('GET /user/profile answered without a gatewaySlug');
  const kuboGatewayUrl = ctx.endpoints.kuboGatewayUrl;
  if (!kuboGatewayUrl) throw new Error("the stack reported no Kubo gateway: the gateway bench needs Kubo's own gateway");
  // The account's gateway by its Host; connections go to 127.0.0.1 (*.localhost may not resolve here).
  const host = { Host: `${gatewaySlug}.localhost:${new URL(ctx.gatewayUrl).port}` };

  say('gateway: uploading 1 GiB and 4 KiB as the bench user');
  const big = await upload(ctx, READ_SIZE, `${seed}-big`);
  const small = await upload(ctx, SMALL_SIZE, `${seed}-small`);
  await awaitPinned(ctx, big.cid);
  await awaitPinned(ctx, small.cid);
  const through = (cid: string) => `${ctx.gatewayUrl}/ipfs/${cid}`;
  const direct = (cid: string) => `${kuboGatewayUrl}/ipfs/${cid}`;
  say(`gateway: ${big.cid} (1 GiB), ${small.cid} (4 KiB); account gateway ${host.Host}`);

  // Content Kubo has and the account does not (added to Kubo alone): the gateway must refuse it.
  const form = multipart('unheld.bin', bytes(SMALL_SIZE, `${seed}-unheld`));
  const added = await postStream(
    `${ctx.endpoints.kuboApiUrl}/api/v0/add?cid-version=1&raw-leaves=true&pin=false`,
    { 'Content-Type': form.contentType },
    form.body,
  );
  if (added.status !== 200) throw new Error(`kubo add answered ${added.status}: ${added.text.slice(0, 300)}`);
  const other = (JSON.parse(added.text.trim().split('\n').pop()!) as { Hash: string }).Hash;
  const unheld = await read(through(other), host);
  const unheldDirect = await read(direct(other), {});
  const refusesUnheld = unheld.status === 410 && unheldDirect.status === 200;
  say(`gateway: content the account does not hold: gateway ${unheld.status}, kubo ${unheldDirect.status}`);

  const apiPid = ctx.api.pid!;
  const kuboPid = readStackFile(ctx.dataDir).pids?.kubo;
  const rssBefore = procMemory(apiPid, 'VmRSS');
  const peakIsOfReads = resetPeakMemory(apiPid);

  // Checked reads, not timed: the bytes of each path hashed against those uploaded. They
  // also warm both paths (connections, JIT, the blocks in the page cache).
  const sums = { gateway: crypto.createHash('sha256'), kubo: crypto.createHash('sha256') };
  const checked = { gateway: await read(through(big.cid), host, sums.gateway), kubo: await read(direct(big.cid), {}, sums.kubo) };
  const sameBytes =
    checked.gateway.status === 200 &&
    checked.kubo.status === 200 &&
    sums.gateway.digest('hex') === big.sha256 &&
    sums.kubo.digest('hex') === big.sha256;
  say(
    `gateway: checked reads: gateway ${checked.gateway.status} ${checked.gateway.bytes} bytes, kubo ${checked.kubo.status} ${checked.kubo.bytes} bytes; ` +
      `${sameBytes ? 'both the uploaded bytes' : 'NOT the uploaded bytes'}`,
  );
  let readThrough = checked.gateway.bytes;

  const seconds = { gateway: 0, kubo: 0 };
  const rounds: GatewayResult['rounds'] = [];
  const ticks = { gateway: { api: 0, kubo: 0, reader: 0 }, kubo: { kubo: 0, reader: 0 } };
  const readerTicks = () => {
    const u = process.cpuUsage();
    return ((u.user + u.system) / 1e6) * TICKS_PER_SECOND;
  };
  const mb = READ_SIZE / MiB;
  for (let round = 0; round < READ_ROUNDS; round++) {
    const order = round % 2 === 0 ? (['kubo', 'gateway'] as const) : (['gateway', 'kubo'] as const);
    const took = { gateway: 0, kubo: 0 };
    for (const path of order) {
      ctx.signal.throwIfAborted();
      const before = { api: cpuTicks(apiPid), kubo: kuboPid ? cpuTicks(kuboPid) : 0, reader: readerTicks() };
      const r = path === 'gateway' ? await read(through(big.cid), host) : await read(direct(big.cid), {});
      if (r.status !== 200 || r.bytes !== READ_SIZE) throw new Error(`${path} read answered ${r.status} with ${r.bytes} bytes`);
      const kuboUsed = kuboPid ? cpuTicks(kuboPid) - before.kubo : 0;
      if (path === 'gateway') {
        readThrough += r.bytes;
        ticks.gateway.api += cpuTicks(apiPid) - before.api;
        ticks.gateway.kubo += kuboUsed;
        ticks.gateway.reader += readerTicks() - before.reader;
      } else {
        ticks.kubo.kubo += kuboUsed;
        ticks.kubo.reader += readerTicks() - before.reader;
      }
      took[path] = r.seconds;
      seconds[path] += r.seconds;
    }
    rounds.push({ gateway: mb / took.gateway, kubo: mb / took.kubo });
    say(
      `gateway: round ${round + 1} of ${READ_ROUNDS} (${order[0]} first): gateway ${(mb / took.gateway).toFixed(1)} MB/s, kubo ${(mb / took.kubo).toFixed(1)} MB/s`,
    );
  }
  const rssPeak = procMemory(apiPid, 'VmHWM');
  const perGiB = (t: number) => t / TICKS_PER_SECOND / READ_ROUNDS;
  const cpuPerGiB = kuboPid
    ? {
        gateway: { api: perGiB(ticks.gateway.api), kubo: perGiB(ticks.gateway.kubo), reader: perGiB(ticks.gateway.reader) },
        kubo: { kubo: perGiB(ticks.kubo.kubo), reader: perGiB(ticks.kubo.reader) },
      }
    : undefined;
  if (cpuPerGiB)
    say(
      `gateway: CPU s per GiB: through the gateway api ${cpuPerGiB.gateway.api.toFixed(2)} + kubo ${cpuPerGiB.gateway.kubo.toFixed(2)} + reader ${cpuPerGiB.gateway.reader.toFixed(2)}; ` +
        `direct kubo ${cpuPerGiB.kubo.kubo.toFixed(2)} + reader ${cpuPerGiB.kubo.reader.toFixed(2)}`,
    );

  // Small reads: a short pass each way first, thrown away (JIT, connection pools, caches).
  say(`gateway: 4 KiB reads, ${CONNECTIONS} connections, 2 s warm-up each + ${LOAD_ROUNDS} rounds of ${LOAD_SECONDS} s each way`);
  readThrough += SMALL_SIZE * (await load(through(small.cid), host, 2)).requests;
  await load(direct(small.cid), {}, 2);
  resetPeakMemory(apiPid);
  const ferretPid = readStackFile(ctx.dataDir).pids?.ferretdb;
  // CPU ms a request of the API process, Kubo and FerretDB (the gateway's account and holds reads).
  const perRequest = (ticks: number, requests: number) => ((ticks * 1000) / TICKS_PER_SECOND / requests).toFixed(2);
  const passes: { gateway: Pass[]; kubo: Pass[] } = { gateway: [], kubo: [] };
  // Requests in flight when a gateway pass (the warm-up too) ended: the gateway may have sent and counted them.
  let unfinished = CONNECTIONS;
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    const order = round % 2 === 0 ? (['kubo', 'gateway'] as const) : (['gateway', 'kubo'] as const);
    const cpu: Record<string, string> = {};
    for (const path of order) {
      ctx.signal.throwIfAborted();
      const before = [cpuTicks(apiPid), kuboPid ? cpuTicks(kuboPid) : 0, ferretPid ? cpuTicks(ferretPid) : 0];
      const pass =
        path === 'gateway' ? await load(through(small.cid), host, LOAD_SECONDS) : await load(direct(small.cid), {}, LOAD_SECONDS);
      const used = [cpuTicks(apiPid), kuboPid ? cpuTicks(kuboPid) : 0, ferretPid ? cpuTicks(ferretPid) : 0].map((t, i) => t - before[i]!);
      cpu[path] =
        `api ${perRequest(used[0]!, pass.requests)} kubo ${perRequest(used[1]!, pass.requests)} ferretdb ${perRequest(used[2]!, pass.requests)}`;
      if (path === 'gateway') {
        readThrough += SMALL_SIZE * pass.requests;
        unfinished += CONNECTIONS;
      }
      passes[path].push(pass);
    }
    const [g, k] = [passes.gateway[round]!, passes.kubo[round]!];
    say(
      `gateway: 4 KiB round ${round + 1} of ${LOAD_ROUNDS}: gateway ${Math.round(g.requests / g.seconds)} req/s (p50 ${g.p50} p99 ${g.p99} ms; ` +
        `CPU ms/request ${cpu.gateway}), kubo ${Math.round(k.requests / k.seconds)} req/s (p50 ${k.p50} p99 ${k.p99} ms; ` +
        `CPU ms/request ${cpu.kubo}); api rss ${Math.round(procMemory(apiPid, 'VmRSS') / MiB)} MB`,
    );
  }
  const rssPeakSmall = procMemory(apiPid, 'VmHWM');

  // The meter writes what it counted once a second (core/bandwidth.ts).
  await new Promise((r) => setTimeout(r, 2500));
  const metered = await meteredBytes(ctx);
  say(
    `gateway: the account's gateway bandwidth (GET /user/profile): ${metered} bytes; read through the gateway: ${readThrough} (+ up to ${unfinished * SMALL_SIZE} in flight)`,
  );
  return {
    gatewayMBps: (READ_ROUNDS * mb) / seconds.gateway,
    kuboMBps: (READ_ROUNDS * mb) / seconds.kubo,
    rounds,
    rssBefore,
    rssPeak,
    rssPeakSmall,
    peakIsOfReads,
    cpuPerGiB,
    small: { gateway: figures(passes.gateway), kubo: figures(passes.kubo) },
    sameBytes,
    refusesUnheld,
    metered,
    readThrough,
    unfinished: unfinished * SMALL_SIZE,
  };
}
