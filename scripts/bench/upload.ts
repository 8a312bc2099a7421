// Benchmark 1: a 1 GiB multipart upload through `POST /upload/new` against the same bytes
// added straight to the stack's Kubo with the same profile options.
//
// Block deduplication: Kubo's blockstore skips writing a block it already has (a `Has` check
// before each `Put`), so whichever add runs second on the same bytes would write nothing and
// look faster. Within a round both runs use the same bytes (so their CIDs must match), Kubo's
// own add goes first, and its blocks, unpinned (pin=false), are removed with `repo gc` before
// the API's upload: both then write every block into the same, equally empty, repo. Each
// round has bytes of its own.
//
// Noise: on a shared two-core machine one 1 GiB run of either path moved by 20-30% between
// bench runs (measured: Kubo 174-252 MB/s). So there are ROUNDS rounds, and each path's best
// round counts, the usual reading of a throughput benchmark on a noisy machine.
import { createClusterClient } from '../../infra/cluster.js';
import { bytes, MiB, multipart, postStream } from './content.js';
import { procMemory, resetPeakMemory } from './children.js';

export const UPLOAD_SIZE = 1024 * MiB;
export const ROUNDS = 2;

// The unixfs-v1-2025 profile as Kubo's own query flags (infra/constants.ts UNIXFS_ADD_OPTIONS).
const KUBO_ADD_QUERY = 'cid-version=1&raw-leaves=true&chunker=size-1048576&hash=sha2-256&max-file-links=1024&pin=false';

export interface UploadResult {
  apiMBps: number;
  kuboMBps: number;
  cid: string;
  sameCid: boolean;
  rssBefore: number;
  rssPeak: number;
  /** Whether the peak is of the upload alone (VmHWM reset just before it). */
  peakIsOfUpload: boolean;
}

interface Target {
  kuboApiUrl: string;
  clusterApiUrl: string;
  apiUrl: string;
  apiKey: string;
  apiPid: number;
  say: (line: string) => void;
}

async function kuboAdd(kuboApiUrl: string, size: number, seed: string): Promise<string> {
  const form = multipart('bench.bin', bytes(size, seed));
  const res = await postStream(`${kuboApiUrl}/api/v0/add?${KUBO_ADD_QUERY}`, { 'Content-Type': form.contentType }, form.body);
  if (res.status !== 200) throw new Error(`kubo add answered ${res.status}: ${res.text.slice(0, 300)}`);
  // One JSON object a line; the last is the file's root.
  const last = res.text.trim().split('\n').pop()!;
  return (JSON.parse(last) as { Hash: string }).Hash;
}

async function apiUpload(t: Target, size: number, seed: string): Promise<string> {
  const form = multipart('bench.bin', bytes(size, seed));
  const res = await postStream(`${t.apiUrl}/upload/new`, { 'Content-Type': form.contentType, 'X-Api-Key': t.apiKey }, form.body);
  if (res.status !== 201) throw new Error(`POST /upload/new answered ${res.status}: ${res.text.slice(0, 300)}`);
  return (JSON.parse(res.text) as { cid: string }).cid;
}

async function kuboGc(kuboApiUrl: string): Promise<void> {
  const res = await fetch(`${kuboApiUrl}/api/v0/repo/gc?quiet=true`, { method: 'POST' });
  const text = await res.text(); // the answer streams while GC runs: read it to the end
  if (res.status !== 200) throw new Error(`kubo repo/gc answered ${res.status}: ${text.slice(0, 300)}`);
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const t = process.hrtime.bigint();
  const value = await run();
  return { value, seconds: Number(process.hrtime.bigint() - t) / 1e9 };
}

/** Waits for the upload's content to be pinned in Cluster, so the next benchmark starts on a quiet stack. */
async function awaitClusterPinned(clusterApiUrl: string, cid: string, signal: AbortSignal): Promise<void> {
  const cluster = createClusterClient(clusterApiUrl);
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    signal.throwIfAborted();
    const info = await cluster.status(cid).catch(() => undefined);
    if (info && Object.values(info.peer_map).some((p) => p.status === 'pinned')) return;
    if (Date.now() > deadline) throw new Error(`${cid} was not pinned in Cluster within 5 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function benchUpload(t: Target, signal: AbortSignal): Promise<UploadResult> {
  const seed = `bench-upload-${Date.now()}`;
  // Warm-up on a few MiB of other bytes: connections, JIT and lazily loaded modules on both
  // paths, so neither timed run pays for them.
  await kuboAdd(t.kuboApiUrl, 8 * MiB, `${seed}-warm-kubo`);
  await apiUpload(t, 8 * MiB, `${seed}-warm-api`);
  await kuboGc(t.kuboApiUrl);
  signal.throwIfAborted();

  const rssBefore = procMemory(t.apiPid, 'VmRSS');
  const peakIsOfUpload = resetPeakMemory(t.apiPid);
  const mb = UPLOAD_SIZE / MiB;
  let best: { kubo: number; api: number } = { kubo: 0, api: 0 };
  let cid = '';
  let sameCid = true;
  for (let round = 1; round <= ROUNDS; round++) {
    const bytesSeed = `${seed}-round-${round}`;
    t.say(`upload: round ${round} of ${ROUNDS}: 1 GiB straight into Kubo`);
    const kubo = await timed(() => kuboAdd(t.kuboApiUrl, UPLOAD_SIZE, bytesSeed));
    await kuboGc(t.kuboApiUrl);
    signal.throwIfAborted();

    t.say(`upload: round ${round} of ${ROUNDS}: the same 1 GiB through POST /upload/new`);
    const api = await timed(() => apiUpload(t, UPLOAD_SIZE, bytesSeed));
    await awaitClusterPinned(t.clusterApiUrl, api.value, signal);
    t.say(`upload: round ${round}: api ${(mb / api.seconds).toFixed(1)} MB/s, kubo ${(mb / kubo.seconds).toFixed(1)} MB/s`);
    best = { kubo: Math.max(best.kubo, mb / kubo.seconds), api: Math.max(best.api, mb / api.seconds) };
    sameCid &&= api.value === kubo.value;
    cid = api.value;
  }
  // The peak covers every API upload of the rounds.
  const rssPeak = procMemory(t.apiPid, 'VmHWM');
  return { apiMBps: best.api, kuboMBps: best.kubo, cid, sameCid, rssBefore, rssPeak, peakIsOfUpload };
}
