// 4 KiB objects over S3 against MinIO on the same machine in the same run (the goals:
// PutObject >= 0.3x MinIO, GetObject >= 1.0x). Both are driven by the same clients: the AWS SDK
// for JavaScript v3 with its defaults (checksums on), CONCURRENCY at a time, SMALL_SECONDS per
// phase. minio/warp, the tool S3 users measure with, is not served by the Go module proxy here
// (403 for its version list and for a release), so the load is ours, the same for both servers.
// Each round runs PUT then GET on one server and then on the other, alternating which goes
// first; PUTs are distinct random bytes (a new object, a new CID each), GETs read that round's
// objects at random. Ratios are per round; the median and the spread are printed, with the CPU
// each process spent per operation.
import crypto from 'node:crypto';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { readStackFile } from '../../stack/stack-file.js';
import { apiCall, apiOperations, type BenchContext } from './harness.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { startMinio } from './minio.js';

export const CONCURRENCY = 16;
export const SMALL_SECONDS = 10;
export const SMALL_ROUNDS = 5;
const OBJECT_BYTES = 4096;
const PUT_GOAL = 0.3;
const GET_GOAL = 1.0;

export interface Load {
  opsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU ms per operation, by process. */
  cpuMs: Record<string, number>;
  /** MongoDB operations the API sent per operation, by `<method> <collection>` (the service only). */
  commands?: Record<string, number>;
}
type Side = { put: Load; get: Load };
export interface S3SmallResult {
  rounds: { stupa: Side; minio: Side }[];
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;

/** Runs `op` from CONCURRENCY clients for `seconds`: ops/s, latencies (ms), and the CPU of `pids` per op. */
export async function load(seconds: number, pids: Record<string, number | undefined>, op: (i: number) => Promise<void>): Promise<Load> {
  const latencies: number[] = [];
  let errors = 0;
  let n = 0;
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuTicks(pid) : 0]));
  const end = Date.now() + seconds * 1000;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        try {
          await op(n++);
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  const done = Math.max(1, latencies.length);
  const cpuMs = Object.fromEntries(
    Object.entries(pids).map(([k, pid]) => [k, pid ? (((cpuTicks(pid) - before[k]!) / TICKS_PER_SECOND) * 1000) / done : 0]),
  );
  latencies.sort((a, b) => a - b);
  return {
    opsPerSecond: latencies.length / elapsed,
    p50: Math.round(percentile(latencies, 50)),
    p99: Math.round(percentile(latencies, 99)),
    errors,
    cpuMs,
  };
}

/** `run`'s Load, with the MongoDB operations per operation the API at `apiUrl` sent meanwhile. */
async function counted(apiUrl: string | undefined, run: () => Promise<Load>): Promise<Load> {
  if (!apiUrl) return run();
  const before = await apiOperations(apiUrl);
  const result = await run();
  const done = Math.max(1, Math.round(result.opsPerSecond * SMALL_SECONDS));
  const commands: Record<string, number> = {};
  for (const [k, n] of await apiOperations(apiUrl)) {
    const perOp = (n - (before.get(k) ?? 0)) / done;
    if (perOp >= 0.005) commands[k] = perOp;
  }
  return { ...result, commands };
}

/** PUT then GET of 4 KiB objects on one server, under the keys `<prefix>/<n>`; `apiUrl` for the service's. */
async function side(
  s3: S3Client,
  bucket: string,
  prefix: string,
  pids: Record<string, number | undefined>,
  apiUrl?: string,
): Promise<Side> {
  const put = await counted(apiUrl, () =>
    load(SMALL_SECONDS, pids, async (i) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/${i}`, Body: crypto.randomBytes(OBJECT_BYTES) }));
    }),
  );
  const written = Math.max(1, Math.round(put.opsPerSecond * SMALL_SECONDS * 0.9));
  const get = await counted(apiUrl, () =>
    load(SMALL_SECONDS, pids, async () => {
      const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}/${crypto.randomInt(written)}` }));
      const body = await out.Body!.transformToByteArray();
      if (body.length !== OBJECT_BYTES) throw new Error(`GetObject gave ${body.length} bytes`);
    }),
  );
  return { put, get };
}

export async function benchS3Small(ctx: BenchContext, say: (line: string) => void, roundCount = SMALL_ROUNDS): Promise<S3SmallResult> {
  const key = await apiCall<{ keyPrefix: string }[]>(ctx, 'GET', '/apikeys');
  const client = (endpoint: string, accessKeyId: string, secretAccessKey: string) => {
    const s3 = new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      maxAttempts: 1,
    });
    ctx.track(async () => s3.destroy());
    return s3;
  };
  const stupa = client(`http://127.0.0.1:${ctx.env.S3_PORT}`, key[0]!.keyPrefix, ctx.user.apiKey);
  const minio = await startMinio(ctx);
  const minioS3 = client(minio.endpoint, minio.accessKeyId, minio.secretAccessKey);
  const bucket = `small-${ctx.user.userId.toLowerCase().replace(/[^a-z0-9]/g, '')}`.slice(0, 40);
  await stupa.send(new CreateBucketCommand({ Bucket: bucket }));
  await minioS3.send(new CreateBucketCommand({ Bucket: bucket }));
  const stack = readStackFile(ctx.dataDir).pids ?? {};
  const stupaPids = {
    api: ctx.api.pid,
    ferretdb: stack.ferretdb,
    worker: ctx.worker.pid,
    kubo: stack.kubo,
    cluster: stack.cluster,
    temporal: stack.temporal,
  };
  const rounds: S3SmallResult['rounds'] = [];
  for (let r = 0; r < roundCount; r++) {
    say(
      `s3 small: round ${r + 1} of ${roundCount}, ${OBJECT_BYTES / 1024} KiB PUT then GET, ${CONCURRENCY} clients, ${SMALL_SECONDS} s each, ${r % 2 ? 'MinIO' : 'Stupa'} first`,
    );
    const runStupa = () => side(stupa, bucket, `r${r}`, stupaPids, ctx.apiUrl);
    const runMinio = () => side(minioS3, bucket, `r${r}`, { minio: minio.pid });
    const [first, second] = r % 2 === 0 ? [runStupa, runMinio] : [runMinio, runStupa];
    const a = await first();
    const b = await second();
    const round = r % 2 === 0 ? { stupa: a, minio: b } : { stupa: b, minio: a };
    rounds.push(round);
    say(
      `s3 small: PUT ${Math.round(round.stupa.put.opsPerSecond)}/s vs MinIO ${Math.round(round.minio.put.opsPerSecond)}/s, ` +
        `GET ${Math.round(round.stupa.get.opsPerSecond)}/s vs MinIO ${Math.round(round.minio.get.opsPerSecond)}/s`,
    );
  }
  return { rounds };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const verdict = (met: boolean) => (met ? 'met' : 'MISSED');

/** One line per operation: ratios (median, spread), rates, latencies, and CPU ms per operation by process. */
export function s3SmallLines(r: S3SmallResult): string[] {
  return (['put', 'get'] as const).map((op) => {
    const ratios = r.rounds.map((x) => x.stupa[op].opsPerSecond / Math.max(1e-9, x.minio[op].opsPerSecond));
    const mid = median(ratios);
    const goal = op === 'put' ? PUT_GOAL : GET_GOAL;
    const rate = (pick: (x: S3SmallResult['rounds'][number]) => Load) => Math.round(median(r.rounds.map((x) => pick(x).opsPerSecond)));
    const cpu = (pick: (x: S3SmallResult['rounds'][number]) => Load) => {
      const keys = Object.keys(pick(r.rounds[0]!).cpuMs);
      return keys.map((k) => `${k} ${mean(r.rounds.map((x) => pick(x).cpuMs[k] ?? 0)).toFixed(2)}`).join(', ');
    };
    const stupaSide = (x: S3SmallResult['rounds'][number]) => x.stupa[op];
    const minioSide = (x: S3SmallResult['rounds'][number]) => x.minio[op];
    const errors = r.rounds.reduce((n, x) => n + x.stupa[op].errors + x.minio[op].errors, 0);
    const commands = new Map<string, number>();
    for (const x of r.rounds)
      for (const [k, n] of Object.entries(x.stupa[op].commands ?? {})) commands.set(k, (commands.get(k) ?? 0) + n / r.rounds.length);
    const total = [...commands.values()].reduce((a, b) => a + b, 0);
    const listed = [...commands].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n.toFixed(2)}`);
    return (
      `bench: s3 4 KiB ${op === 'put' ? 'PutObject' : 'GetObject'}  ${CONCURRENCY} clients: stupa ${rate(stupaSide)}/s (p50 ${median(r.rounds.map((x) => stupaSide(x).p50))} ms) ` +
      `vs MinIO ${rate(minioSide)}/s (p50 ${median(r.rounds.map((x) => minioSide(x).p50))} ms)  ratio ${mid.toFixed(2)} ` +
      `[rounds ${ratios.map((x) => x.toFixed(2)).join(', ')}] (goal >= ${goal}: ${verdict(mid >= goal)})  ` +
      `[cpu ms/op: ${cpu(stupaSide)}; MinIO ${cpu(minioSide)}]  [MongoDB operations/op from the API: ${total.toFixed(2)}: ${listed.join(', ')}]  [${errors} errors]`
    );
  });
}

export function s3SmallBroken(r: S3SmallResult): string[] {
  const errors = r.rounds.reduce((n, x) => n + x.stupa.put.errors + x.stupa.get.errors, 0);
  return errors > 0 ? [`${errors} small S3 requests to the service failed`] : [];
}
