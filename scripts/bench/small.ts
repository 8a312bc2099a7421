// Benchmark: many small files at once, as a service for NFT metadata or a photo library sends
// them. One account, empty at the start of each round (a new user per round), uploads FILES
// JSON documents of about 1 KiB with CLIENTS clients in parallel (`POST /upload/new` with a
// JSON body, each client sending its next file as soon as the last was answered); against it,
// Kubo's own add (`/api/v0/add`, one request per file, the service's options) of other files of
// the same shape at the same concurrency. Rounds alternate which goes first, each path adds
// bytes of its own (Kubo would skip blocks it has), and each round's ratio is of its two runs.
//
// A 503 (BUSY, OVERLOADED or a dependency) is retried after its Retry-After, as a client
// would, and counted: the goal is none. Any other answer than 201 fails the bench. After the
// API's run the bench also waits until Cluster reports every uploaded file pinned (in Kubo, by
// its peer: the durable pin the answer promised) and reports how long after the first request
// that was. CPU milliseconds
// per upload of the API, the worker, FerretDB, Temporal, Kubo and Cluster show where the work
// goes.
import crypto from 'node:crypto';
import { readStackFile } from '../../stack/stack-file.js';
import { createBenchUser, cpuTicks, TICKS_PER_SECOND } from './children.js';
import { apiOperations, type BenchContext } from './harness.js';
import { spread, type Spread } from './spread.js';

export const FILES = 1000;
export const CLIENTS = 16;
export const SMALL_ROUNDS = 3;
const FILE_BYTES = 1024;

const KUBO_ADD_QUERY = 'cid-version=1&raw-leaves=true&chunker=size-1048576&hash=sha2-256&max-file-links=1024&pin=false&quieter=true';

export interface SmallResult {
  rounds: { api: number; kubo: number; ratio: number; pinnedAfter: number }[];
  ratio: Spread;
  apiPerSecond: Spread;
  kuboPerSecond: Spread;
  /** Seconds from the first request until Cluster had pinned every file, per API run. */
  pinnedAfter: Spread;
  /** 503 answers to the API's uploads over all rounds (each retried). */
  busy: number;
  /** CPU ms per upload through the API, by process. */
  cpuMs: Record<string, number>;
  /** MongoDB operations the API sent per upload, by `<method> <collection>`, most first. */
  commands: [string, number][];
}

/** A JSON document of about FILE_BYTES bytes (as the service stores it), distinct per seed and index. */
export function metadata(seed: string, i: number): Record<string, unknown> {
  const doc = {
    name: `Bench item #${i}`,
    description: `A small JSON document of the small-files benchmark (${seed}).`,
    image: `ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/${i}.png`,
    attributes: [
      { trait_type: 'index', value: i },
      { trait_type: 'seed', value: seed },
    ],
    padding: '',
  };
  doc.padding = 'x'.repeat(Math.max(0, FILE_BYTES - JSON.stringify(doc).length));
  return doc;
}

export async function runClients(count: number, send: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let i = next++; i < count; i = next++) await send(i);
    }),
  );
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function kuboAdd(kuboApiUrl: string, body: string): Promise<void> {
  const boundary = `----stupasmall${crypto.randomBytes(8).toString('hex')}`;
  const form =
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="item.json"\r\nContent-Type: application/json\r\n\r\n` +
    `${body}\r\n--${boundary}--\r\n`;
  return fetch(`${kuboApiUrl}/api/v0/add?${KUBO_ADD_QUERY}`, {
    method: 'POST',
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    body: form,
  }).then(async (res) => {
    const text = await res.text();
    if (res.status !== 200) throw new Error(`kubo add answered ${res.status}: ${text.slice(0, 300)}`);
  });
}

/** Waits until Cluster reports every CID `pinned` (its peer has it pinned in Kubo); seconds since `since`. */
async function allPinned(clusterApiUrl: string, cids: string[], since: number, signal: AbortSignal): Promise<number> {
  const wanted = new Set(cids);
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    signal.throwIfAborted();
    const res = await fetch(`${clusterApiUrl}/pins?filter=pinned`, { signal });
    const lines = (await res.text()).split('\n').filter((l) => l.trim() !== '');
    const pinned = new Set(lines.map((l) => (JSON.parse(l) as { cid: string }).cid));
    const missing = [...wanted].filter((c) => !pinned.has(c));
    if (missing.length === 0) return (Date.now() - since) / 1000;
    if (Date.now() > deadline) throw new Error(`${missing.length} of ${cids.length} uploads were not pinned in Cluster after 10 minutes`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `files` per round on each side (FILES unless given: `bench -- --temporal` sends fewer). */
export async function benchSmallFiles(
  ctx: BenchContext,
  say: (line: string) => void,
  roundCount = SMALL_ROUNDS,
  files = FILES,
): Promise<SmallResult> {
  const { kuboApiUrl, clusterApiUrl } = ctx.endpoints;
  const stack = readStackFile(ctx.dataDir).pids ?? {};
  const pids: Record<string, number | undefined> = {
    api: ctx.api.pid,
    worker: ctx.worker.pid,
    ferretdb: stack.ferretdb,
    temporal: stack.temporal,
    kubo: stack.kubo,
    cluster: stack.cluster,
  };
  const ticks = Object.fromEntries(Object.keys(pids).map((k) => [k, 0]));
  const seed = crypto.randomBytes(6).toString('hex');
  const rounds: SmallResult['rounds'] = [];
  const commands = new Map<string, number>();
  let busy = 0;

  // Warm-up, thrown away: JIT, connection pools, both paths' first requests.
  const warm = await createBenchUser(ctx.env);
  await Promise.all(Array.from({ length: 32 }, (_, i) => uploadOne(warm.apiKey, metadata(`${seed}-warm`, i))));
  await Promise.all(Array.from({ length: 32 }, (_, i) => kuboAdd(kuboApiUrl, JSON.stringify(metadata(`${seed}-warm-kubo`, i)))));

  async function uploadOne(apiKey: string, doc: unknown): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      ctx.signal.throwIfAborted();
      const res = await fetch(`${ctx.apiUrl}/upload/new`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Api-Key': apiKey },
        body: JSON.stringify({ content: doc }),
      });
      const text = await res.text();
      if (res.status === 201) return (JSON.parse(text) as { cid: string }).cid;
      if (res.status !== 503 || attempt === 10) throw new Error(`POST /upload/new answered ${res.status}: ${text.slice(0, 300)}`);
      busy++;
      await new Promise((r) => setTimeout(r, 1000 * Number(res.headers.get('retry-after') ?? 1)));
    }
  }

  for (let round = 1; round <= roundCount; round++) {
    const user = await createBenchUser(ctx.env); // an empty account each round
    const order = round % 2 === 1 ? (['kubo', 'api'] as const) : (['api', 'kubo'] as const);
    const rate = { api: 0, kubo: 0 };
    let pinnedAfter = 0;
    for (const path of order) {
      const docs = Array.from({ length: files }, (_, i) => JSON.stringify(metadata(`${seed}-${path}-${round}`, i)));
      if (path === 'kubo') {
        rate.kubo = files / (await runClients(files, (i) => kuboAdd(kuboApiUrl, docs[i]!)));
        continue;
      }
      const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuTicks(pid) : 0]));
      const sentBefore = await apiOperations(ctx.apiUrl);
      const cids: string[] = [];
      const start = Date.now();
      const seconds = await runClients(files, async (i) => void cids.push(await uploadOne(user.apiKey, JSON.parse(docs[i]!))));
      rate.api = files / seconds;
      for (const [k, pid] of Object.entries(pids)) if (pid) ticks[k]! += cpuTicks(pid) - before[k]!;
      for (const [k, n] of await apiOperations(ctx.apiUrl)) commands.set(k, (commands.get(k) ?? 0) + n - (sentBefore.get(k) ?? 0));
      pinnedAfter = await allPinned(clusterApiUrl, cids, start, ctx.signal);
    }
    rounds.push({ ...rate, ratio: rate.api / rate.kubo, pinnedAfter });
    say(
      `small files: round ${round} (${order[0]} first): api ${rate.api.toFixed(1)}/s, kubo ${rate.kubo.toFixed(1)}/s, ` +
        `ratio ${(rate.api / rate.kubo).toFixed(2)}, all pinned in Cluster ${pinnedAfter.toFixed(1)} s after the first request; 503s so far ${busy}`,
    );
  }
  const uploads = files * roundCount;
  const cpuMs = Object.fromEntries(Object.entries(ticks).map(([k, t]) => [k, ((t / TICKS_PER_SECOND) * 1000) / uploads]));
  return {
    rounds,
    ratio: spread(rounds.map((r) => r.ratio)),
    apiPerSecond: spread(rounds.map((r) => r.api)),
    kuboPerSecond: spread(rounds.map((r) => r.kubo)),
    pinnedAfter: spread(rounds.map((r) => r.pinnedAfter)),
    busy,
    cpuMs,
    commands: [...commands]
      .map(([k, n]): [string, number] => [k, n / uploads])
      .filter(([, perUpload]) => perUpload >= 0.005)
      .sort((a, b) => b[1] - a[1]),
  };
}
