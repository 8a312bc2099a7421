// The S3 interface (api/s3/), as the issue asks it measured:
// 1. 4 KiB PutObject and GetObject against MinIO in the same run (s3-small.ts; `--s3-small`
//    runs only this part, `--rounds N` sets its rounds).
// 2. 1 GiB PutObject (streamed, aws-chunked with a CRC32 trailer, MD5 computed by the server)
//    against `POST /upload/new` of the same bytes, BIG_ROUNDS rounds alternating which goes
//    first; each path's MB/s is its bytes over its summed time. The CIDs must be equal.
// 3. CompleteMultipartUpload of a 5 GiB object in 8 MiB parts (640 parts, uploaded first,
//    4 at once): the time from the request to its answer. Goal: < 5 s. The object's CID must
//    equal Kubo's add of the same bytes (only-hash).
import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import pLimit from 'p-limit';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { apiCall, type BenchContext } from './harness.js';
import { bytes, MiB, multipart, postStream } from './content.js';
import { benchS3Small, s3SmallBroken, s3SmallLines, type S3SmallResult } from './s3-small.js';

export const BIG_SIZE = 1024 * MiB;
export const BIG_ROUNDS = 2;
export const MPU_SIZE = 5 * 1024 * MiB;
export const PART_SIZE = 8 * MiB;

export interface S3Result {
  small: S3SmallResult;
  big: { s3MBps: number; restMBps: number; rounds: { s3: number; rest: number }[]; sameCid: boolean };
  complete: { seconds: number; uploadSeconds: number; sameCid: boolean };
}

export async function benchS3(ctx: BenchContext, say: (line: string) => void): Promise<S3Result> {
  const { userId } = ctx.user;
  const key = await apiCall<{ keyPrefix: string }[]>(ctx, 'GET', '/apikeys');
  const s3 = new S3Client({
    endpoint: `http://127.0.0.1:${ctx.env.S3_PORT}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: key[0]!.keyPrefix, secretAccessKey: ctx.user.apiKey },
    maxAttempts: 1,
  });
  ctx.track(async () => s3.destroy());
  const bucket = `bench-${userId.toLowerCase().replace(/[^a-z0-9]/g, '')}`.slice(0, 40);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));

  const small = await benchS3Small(ctx, say);

  const rounds: { s3: number; rest: number }[] = [];
  let s3Cid = '';
  let restCid = '';
  for (let round = 0; round < BIG_ROUNDS; round++) {
    const timeS3 = async () => {
      const t = performance.now();
      await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: 'big.bin',
          Body: Readable.from(bytes(BIG_SIZE, 'bench-s3-big')),
          ContentLength: BIG_SIZE,
        }),
      );
      const seconds = (performance.now() - t) / 1000;
      s3Cid = (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big.bin' }))).Metadata!.cid!;
      return BIG_SIZE / 1e6 / seconds;
    };
    const timeRest = async () => {
      const form = multipart('big.bin', bytes(BIG_SIZE, 'bench-s3-big'));
      const t = performance.now();
      const res = await postStream(
        `${ctx.apiUrl}/upload/new`,
        { 'X-Api-Key': ctx.user.apiKey, 'Content-Type': form.contentType },
        form.body,
      );
      const seconds = (performance.now() - t) / 1000;
      if (res.status !== 201) throw new Error(`REST upload answered ${res.status}: ${res.text}`);
      restCid = (JSON.parse(res.text) as { cid: string }).cid;
      return BIG_SIZE / 1e6 / seconds;
    };
    const [first, second] = round % 2 === 0 ? [timeS3, timeRest] : [timeRest, timeS3];
    const a = await first();
    const b = await second();
    rounds.push(round % 2 === 0 ? { s3: a, rest: b } : { s3: b, rest: a });
    say(`s3: 1 GiB round ${round + 1}: PutObject ${rounds.at(-1)!.s3.toFixed(1)} MB/s, REST upload ${rounds.at(-1)!.rest.toFixed(1)} MB/s`);
  }
  const mbps = (pick: (r: { s3: number; rest: number }) => number) =>
    ((BIG_SIZE / 1e6) * rounds.length) / rounds.reduce((sum, r) => sum + BIG_SIZE / 1e6 / pick(r), 0);

  say(`s3: uploading ${MPU_SIZE / MiB / 1024} GiB in ${PART_SIZE / MiB} MiB parts`);
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'huge.bin' }));
  const limit = pLimit(4);
  // One part's bytes are taken from the generator at a time, so parts get consecutive bytes.
  const reader = pLimit(1);
  const partCount = Math.ceil(MPU_SIZE / PART_SIZE);
  const source = bytes(MPU_SIZE, 'bench-s3-mpu');
  const tUpload = performance.now();
  const parts = await Promise.all(
    Array.from({ length: partCount }, (_, i) =>
      limit(async () => {
        const pieces = await reader(async () => {
          const taken: Uint8Array[] = [];
          for (let got = 0; got < PART_SIZE;) {
            const next = await source.next();
            if (next.done) break;
            taken.push(next.value);
            got += next.value.length;
          }
          return taken;
        });
        const out = await s3.send(
          new UploadPartCommand({ Bucket: bucket, Key: 'huge.bin', UploadId, PartNumber: i + 1, Body: Buffer.concat(pieces) }),
        );
        return { PartNumber: i + 1, ETag: out.ETag };
      }),
    ),
  );
  const uploadSeconds = (performance.now() - tUpload) / 1000;
  const t = performance.now();
  await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'huge.bin', UploadId, MultipartUpload: { Parts: parts } }));
  const seconds = (performance.now() - t) / 1000;
  const huge = (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'huge.bin' }))).Metadata!.cid!;
  const kubo = createKubo(ctx.endpoints.kuboApiUrl);
  const whole = (await kubo.add(bytes(MPU_SIZE, 'bench-s3-mpu'), { onlyHash: true, pin: false })).cid.toString();
  say(`s3: CompleteMultipartUpload ${seconds.toFixed(2)} s (parts uploaded in ${uploadSeconds.toFixed(0)} s)`);
  return {
    small,
    big: { s3MBps: mbps((r) => r.s3), restMBps: mbps((r) => r.rest), rounds, sameCid: s3Cid === restCid },
    complete: { seconds, uploadSeconds, sameCid: huge === whole },
  };
}

const fixed = (n: number, digits = 1) => n.toFixed(digits);

/** The S3 figures, one line each. */
export function s3Lines(r: S3Result): string[] {
  const ratio = r.big.s3MBps / r.big.restMBps;
  return [
    ...s3SmallLines(r.small),
    `bench: s3 1 GiB PutObject  ${fixed(r.big.s3MBps)} MB/s  REST upload ${fixed(r.big.restMBps)} MB/s  ratio ${fixed(ratio, 2)} ` +
      `[rounds ${r.big.rounds.map((x) => `${fixed(x.s3)}/${fixed(x.rest)}`).join(', ')}]`,
    `bench: s3 CompleteMultipartUpload of 5 GiB in ${PART_SIZE / MiB} MiB parts: ${fixed(r.complete.seconds, 2)} s (goal < 5 s; the parts took ${fixed(r.complete.uploadSeconds, 0)} s to upload)`,
  ];
}

/** What the run got wrong (a failure, not a figure). */
export function s3Broken(r: S3Result): string[] {
  return [
    ...(r.big.sameCid ? [] : ['the 1 GiB PutObject and the REST upload of the same bytes gave different CIDs']),
    ...(r.complete.sameCid ? [] : ["the 5 GiB multipart object's CID is not Kubo's for the same bytes"]),
    ...s3SmallBroken(r.small),
  ];
}

/** `npm run bench -- --s3`. */
export async function s3Only(ctx: BenchContext, say: (line: string) => void): Promise<number> {
  const result = await benchS3(ctx, say);
  process.stdout.write(`\n${s3Lines(result).join('\n')}\n`);
  const broken = s3Broken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}

/** `npm run bench -- --s3-small [--rounds N]`: the 4 KiB objects against MinIO alone. */
export async function s3SmallOnly(ctx: BenchContext, say: (line: string) => void, rounds?: number): Promise<number> {
  const result = await benchS3Small(ctx, say, rounds);
  process.stdout.write(`\n${s3SmallLines(result).join('\n')}\n`);
  const broken = s3SmallBroken(result);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}
