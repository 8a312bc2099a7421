// Benchmark 1: a 1 GiB multipart upload through `POST /upload/new` against the same bytes
// added straight to the stack's Kubo with the options the service adds with (the
// unixfs-v1-2025 profile, pin=false), timed as a client sees each: from the first byte sent
// to the whole answer.
//
// What makes the two runs comparable:
// - Every timed run starts on an equally empty repo. Kubo skips writing blocks it already has,
//   so whichever add ran second on the same bytes would write nothing. After each run its
//   blocks go: Kubo's own add is unpinned, so `repo gc` removes it; the API's upload is
//   pinned (by Cluster), so it is first deleted through the API (DELETE /pin/:cid) and
//   awaited unpinned, then collected. Both runs of a round send the same bytes (their CIDs
//   must match); each round has bytes of its own. `sync` before each timed run: none starts
//   with the last one's writes still going to disk.
// - The order alternates (odd rounds Kubo first), and each round's ratio is of that round's
//   two runs, which saw the same machine; the figure is the spread of those ratios
//   (min/median/max). The bench used to take each path's best round on its own, maxima from
//   different moments of a shared machine, always Kubo first.
// - The client is curl sending a file (written before the round), as a native client would;
//   `--upload-client node` makes the bytes in this process instead (AES-CTR, node:http),
//   which costs it 0.9-1.3 CPU s per GiB against curl's 0.5-0.7, on the same two cores.
// - CPU seconds per GiB of the API process (every one competes with Kubo's hashing on two
//   cores), of Kubo on each path, and of the client are read from /proc around each run.
// - A third run of each round goes through a bare proxy (bare-proxy.ts: node:http piping the
//   body to Kubo unread), the floor of any proxy in Node, as bare Express is for status reads:
//   its ratio to Kubo and its CPU per GiB say how much of the API's cost is its own.
import { execFile, fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { readStackFile } from '../../stack/stack-file.js';
import { bytes, MiB, multipart, postStream } from './content.js';
import { cpuTicks, pin, procMemory, resetPeakMemory, TICKS_PER_SECOND } from './children.js';
import type { BenchContext } from './harness.js';
import { spread, type Spread } from './spread.js';

export const UPLOAD_SIZE = 1024 * MiB;
export const ROUNDS = 6;
/** Rounds with the API and Kubo on cores of their own (taskset), as in a deployment. */
export const SEPARATE_ROUNDS = 4;
/** How long the API idles before the rounds (30 s was enough for V8's idle-time collections). */
const API_IDLE_MS = 30_000;

const exec = promisify(execFile);

// The unixfs-v1-2025 profile as Kubo's own query flags (infra/constants.ts UNIXFS_ADD_OPTIONS).
const KUBO_ADD_QUERY =
  'cid-version=1&raw-leaves=true&chunker=size-1048576&hash=sha2-256&max-file-links=1024&trickle=false&pin=false&progress=false&quieter=true';

type Path = 'api' | 'kubo' | 'proxy';

export interface UploadResult {
  client: UploadClient;
  /** Each round's MB/s per path and the ratios api / kubo and proxy / kubo, in round order. */
  rounds: { api: number; kubo: number; proxy: number; ratio: number; proxyRatio: number; first: Path }[];
  ratio: Spread;
  proxyRatio: Spread;
  apiMBps: Spread;
  kuboMBps: Spread;
  /** CPU seconds per GiB: the API process, the bare proxy, Kubo (each path), this client (each path). */
  cpu?: { api: number; proxy: number; kuboViaApi: number; kubo: number; clientViaApi: number; client: number };
  /** API over Kubo with Kubo's threads on CPU 0 and the API and the client on CPU 1; null
   * without taskset or a second CPU. */
  separate: { ratio: Spread; rounds: { api: number; kubo: number }[] } | null;
  sameCid: boolean;
  rssBefore: number;
  rssPeak: number;
  /** Whether the peak is of the uploads alone (VmHWM reset just before them). */
  peakIsOfUpload: boolean;
}

/** Sends `size` bytes made from `seed` as a multipart `file` part; the status and answer. */
async function send(url: string, headers: Record<string, string>, size: number, seed: string, file?: string) {
  if (file) {
    // curl, with the bytes in a file written before the timing starts.
    const args = ['-sS', '-o', '-', '-w', '\n%{http_code}', '-F', `file=@${file};filename=bench.bin;type=application/octet-stream`];
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
    const { stdout } = await exec('curl', [...args, url], { maxBuffer: 16 * MiB });
    const at = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(at + 1)), text: stdout.slice(0, at) };
  }
  const form = multipart('bench.bin', bytes(size, seed));
  return postStream(url, { ...headers, 'Content-Type': form.contentType }, form.body);
}

async function kuboAdd(kuboApiUrl: string, size: number, seed: string, file?: string): Promise<string> {
  const res = await send(`${kuboApiUrl}/api/v0/add?${KUBO_ADD_QUERY}`, {}, size, seed, file);
  if (res.status !== 200) throw new Error(`kubo add answered ${res.status}: ${res.text.slice(0, 300)}`);
  // One JSON object a line; the last is the file's root.
  const last = res.text.trim().split('\n').pop()!;
  return (JSON.parse(last) as { Hash: string }).Hash;
}

async function apiUpload(ctx: BenchContext, size: number, seed: string, file?: string): Promise<string> {
  const res = await send(`${ctx.apiUrl}/upload/new`, { 'X-Api-Key': ctx.user.apiKey }, size, seed, file);
  if (res.status !== 201) throw new Error(`POST /upload/new answered ${res.status}: ${res.text.slice(0, 300)}`);
  return (JSON.parse(res.text) as { cid: string }).cid;
}

/** The bare proxy (bare-proxy.ts) in a process of its own: its URL, pid and stop. */
async function startBareProxy(kuboApiUrl: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const child = fork(new URL('./bare-proxy.ts', import.meta.url), [kuboApiUrl], { execArgv: ['--import', 'tsx'], stdio: 'ignore' });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`the bare proxy exited (${code}) before it listened`)));
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill();
    });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
}

async function kuboGc(kuboApiUrl: string): Promise<void> {
  const res = await fetch(`${kuboApiUrl}/api/v0/repo/gc?quiet=true`, { method: 'POST' });
  const text = await res.text(); // the answer streams while GC runs: read it to the end
  if (res.status !== 200) throw new Error(`kubo repo/gc answered ${res.status}: ${text.slice(0, 300)}`);
}

async function until(what: string, check: () => Promise<boolean>, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + 5 * 60_000;
  while (!(await check().catch(() => false))) {
    signal.throwIfAborted();
    if (Date.now() > deadline) throw new Error(`${what} within 5 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Removes the API's upload: deleted through the API, awaited out of Cluster and Kubo's pins, then collected. */
async function dropApiUpload(ctx: BenchContext, cid: string): Promise<void> {
  const { kuboApiUrl, clusterApiUrl } = ctx.endpoints;
  const cluster = createClusterClient(clusterApiUrl);
  const pinned = async () => Object.values((await cluster.status(cid)).peer_map).some((p) => p.status === 'pinned');
  // Pinned first, so the unpin that follows is the last word.
  await until(`${cid} was not pinned in Cluster`, pinned, ctx.signal);
  const res = await fetch(`${ctx.apiUrl}/pin/${cid}`, { method: 'DELETE', headers: { 'X-Api-Key': ctx.user.apiKey } });
  if (res.status !== 200) throw new Error(`DELETE /pin/${cid} answered ${res.status}: ${await res.text()}`);
  const kuboPinned = async () => (await fetch(`${kuboApiUrl}/api/v0/pin/ls?arg=${cid}&type=recursive`, { method: 'POST' })).ok;
  await until(`${cid} was not unpinned`, async () => !(await kuboPinned()), ctx.signal);
  await kuboGc(kuboApiUrl);
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const t = process.hrtime.bigint();
  const value = await run();
  return { value, seconds: Number(process.hrtime.bigint() - t) / 1e9 };
}

/** CPU ticks of this process and of its children that ended (curl): user, system, and theirs. */
function clientTicks(): number {
  const fields = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
}

/** The bytes of a round in a file, for curl (written, and flushed to disk, before the timing). */
async function roundFile(dir: string, size: number, seed: string): Promise<string> {
  const file = path.join(dir, 'upload-round.bin');
  await pipeline(Readable.from(bytes(size, seed)), fs.createWriteStream(file));
  return file;
}

export type UploadClient = 'curl' | 'node';

/**
 * `client`: `curl` sends a file written before each round, the way the hand
 * measurement did and as a native client would; `node` makes the bytes as it sends them
 * (AES-CTR, node:http), costing this process about a CPU second per GiB on the same two cores.
 */
export async function benchUpload(
  ctx: BenchContext,
  say: (line: string) => void,
  rounds = ROUNDS,
  wanted: UploadClient = 'curl',
): Promise<UploadResult> {
  const client = wanted === 'curl' && !(await exec('curl', ['--version']).then(Boolean, () => false)) ? 'node' : wanted;
  if (client !== wanted) say('upload: no curl here: the Node client sends the bytes');
  const { kuboApiUrl } = ctx.endpoints;
  const apiPid = ctx.api.pid!;
  const kuboPid = readStackFile(ctx.dataDir).pids?.kubo;
  const seed = `bench-upload-${Date.now()}`;
  const proxy = await startBareProxy(kuboApiUrl);
  ctx.track(proxy.stop);
  // Warm-up on a few MiB of other bytes: connections, JIT and lazily loaded modules on every
  // path, so no timed run pays for them.
  await kuboAdd(kuboApiUrl, 8 * MiB, `${seed}-warm-kubo`);
  await kuboAdd(proxy.url, 8 * MiB, `${seed}-warm-proxy`);
  await dropApiUpload(ctx, await apiUpload(ctx, 8 * MiB, `${seed}-warm-api`));
  // Then idle, as a deployed API process mostly is: V8's idle-time collections set its heap's
  // limits, which a process that has only just started never meets (api/main.ts: measured, such
  // a process spent twice the CPU of a fresh one on a 1 GiB upload before the API tuned V8).
  say(`upload: the API idles ${API_IDLE_MS / 1000} s first, as a process that has been up a while`);
  await new Promise((r) => setTimeout(r, API_IDLE_MS));
  ctx.signal.throwIfAborted();

  const rssBefore = procMemory(apiPid, 'VmRSS');
  const peakIsOfUpload = resetPeakMemory(apiPid);
  const mb = UPLOAD_SIZE / MiB;
  const results: UploadResult['rounds'] = [];
  const ticks = { api: 0, proxy: 0, kuboViaApi: 0, kubo: 0, clientViaApi: 0, client: 0 };
  const paths: Path[] = ['kubo', 'api', 'proxy'];
  let sameCid = true;
  for (let round = 1; round <= rounds; round++) {
    const bytesSeed = `${seed}-round-${round}`;
    // Each path goes first, second and third in turn.
    const order = paths.map((_, i) => paths[(i + round - 1) % paths.length]!);
    const speed = { api: 0, kubo: 0, proxy: 0 };
    const cids: Record<Path, string> = { api: '', kubo: '', proxy: '' };
    /** This round's CPU seconds of the API and of the bare proxy, each on its own run. */
    const used = { api: 0, proxy: 0 };
    const file = client === 'curl' ? await roundFile(ctx.dataDir, UPLOAD_SIZE, bytesSeed) : undefined;
    for (const path of order) {
      ctx.signal.throwIfAborted();
      await exec('sync');
      const how = { api: 'through POST /upload/new', kubo: 'straight into Kubo', proxy: 'through the bare proxy' }[path];
      say(`upload: round ${round} of ${rounds}: 1 GiB ${how}`);
      const before = { api: cpuTicks(apiPid), proxy: cpuTicks(proxy.pid), kubo: kuboPid ? cpuTicks(kuboPid) : 0, client: clientTicks() };
      const run = await timed(() =>
        path === 'api'
          ? apiUpload(ctx, UPLOAD_SIZE, bytesSeed, file)
          : kuboAdd(path === 'kubo' ? kuboApiUrl : proxy.url, UPLOAD_SIZE, bytesSeed, file),
      );
      const kuboUsed = kuboPid ? cpuTicks(kuboPid) - before.kubo : 0;
      const clientUsed = clientTicks() - before.client;
      if (path === 'api') {
        const apiUsed = cpuTicks(apiPid) - before.api;
        used.api = apiUsed / TICKS_PER_SECOND;
        ticks.api += apiUsed;
        ticks.kuboViaApi += kuboUsed;
        ticks.clientViaApi += clientUsed;
        await dropApiUpload(ctx, run.value);
      } else {
        if (path === 'kubo') {
          ticks.kubo += kuboUsed;
          ticks.client += clientUsed;
        } else {
          const proxyUsed = cpuTicks(proxy.pid) - before.proxy;
          used.proxy = proxyUsed / TICKS_PER_SECOND;
          ticks.proxy += proxyUsed;
        }
        await kuboGc(kuboApiUrl);
      }
      speed[path] = mb / run.seconds;
      cids[path] = run.value;
    }
    if (file) fs.rmSync(file, { force: true });
    sameCid &&= cids.api === cids.kubo && cids.proxy === cids.kubo;
    results.push({ ...speed, ratio: speed.api / speed.kubo, proxyRatio: speed.proxy / speed.kubo, first: order[0]! });
    say(
      `upload: round ${round} (${order.join(', ')}): api ${speed.api.toFixed(1)} MB/s, kubo ${speed.kubo.toFixed(1)} MB/s, ` +
        `bare proxy ${speed.proxy.toFixed(1)} MB/s; ratio ${(speed.api / speed.kubo).toFixed(2)}, bare proxy ${(speed.proxy / speed.kubo).toFixed(2)}; ` +
        `cpu s: api ${used.api.toFixed(2)}, bare proxy ${used.proxy.toFixed(2)}`,
    );
  }
  // The peak covers every API upload of the rounds.
  const rssPeak = procMemory(apiPid, 'VmHWM');
  await proxy.stop();

  // Kubo alone on CPU 0; the API, this process and the curl it starts (affinity is inherited) on CPU 1.
  let separate: UploadResult['separate'] = null;
  if (kuboPid && pin(kuboPid, '0') && pin(apiPid, '1') && pin(process.pid, '1')) {
    try {
      const each: { api: number; kubo: number }[] = [];
      for (let round = 1; round <= SEPARATE_ROUNDS; round++) {
        const bytesSeed = `${seed}-separate-${round}`;
        const file = client === 'curl' ? await roundFile(ctx.dataDir, UPLOAD_SIZE, bytesSeed) : undefined;
        const speed = { api: 0, kubo: 0 };
        for (const path of round % 2 ? (['kubo', 'api'] as const) : (['api', 'kubo'] as const)) {
          ctx.signal.throwIfAborted();
          await exec('sync');
          const run = await timed(() =>
            path === 'api' ? apiUpload(ctx, UPLOAD_SIZE, bytesSeed, file) : kuboAdd(kuboApiUrl, UPLOAD_SIZE, bytesSeed, file),
          );
          if (path === 'api') await dropApiUpload(ctx, run.value);
          else await kuboGc(kuboApiUrl);
          speed[path] = mb / run.seconds;
        }
        if (file) fs.rmSync(file, { force: true });
        each.push(speed);
        say(
          `upload: separate cores, round ${round} of ${SEPARATE_ROUNDS}: api ${speed.api.toFixed(1)} MB/s, kubo ${speed.kubo.toFixed(1)} MB/s; ratio ${(speed.api / speed.kubo).toFixed(2)}`,
        );
      }
      separate = { ratio: spread(each.map((r) => r.api / r.kubo)), rounds: each };
    } finally {
      for (const pid of [kuboPid, apiPid, process.pid]) pin(pid, '0-1');
    }
  } else say('upload: taskset or a second CPU is missing: no separate-cores rounds');
  const perGiB = (t: number) => t / TICKS_PER_SECOND / rounds;
  const cpu = kuboPid
    ? {
        api: perGiB(ticks.api),
        proxy: perGiB(ticks.proxy),
        kuboViaApi: perGiB(ticks.kuboViaApi),
        kubo: perGiB(ticks.kubo),
        clientViaApi: perGiB(ticks.clientViaApi),
        client: perGiB(ticks.client),
      }
    : undefined;
  return {
    client,
    rounds: results,
    ratio: spread(results.map((r) => r.ratio)),
    proxyRatio: spread(results.map((r) => r.proxyRatio)),
    apiMBps: spread(results.map((r) => r.api)),
    kuboMBps: spread(results.map((r) => r.kubo)),
    cpu,
    separate,
    sameCid,
    rssBefore,
    rssPeak,
    peakIsOfUpload,
  };
}
