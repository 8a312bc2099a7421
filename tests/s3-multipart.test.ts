// S3 multipart uploads: the object's CID equals a plain upload of the same bytes (parts'
// leaves reused when parts are whole MiB, re-chunked otherwise), S3's ETag, part rules and
// listings, retries and aborts, the parts' storage reservation, a worker killed during a
// completion, and the cleanup of abandoned uploads.
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { cleanAbandonedUploads } from '../core/s3/multipart.js';
import { bytes, collect, kuboCid, MiB } from './support/content.js';
import { bucketName, s3Client, s3Failure, s3Suite } from './support/s3.js';
import { createUser } from './support/stack.js';
import { eventually, startWorkerProcess } from './support/worker.js';

const t = s3Suite('mpu');

const md5 = (data: Buffer) => crypto.createHash('md5').update(data).digest();
const used = () => t.api.deps.db.usage.used(t.user.userId);
/** The CID Kubo gives the parts' bytes added at once (its profile). */
const wholeCid = (parts: Buffer[]) =>
  kuboCid(async function* () {
    yield Buffer.concat(parts);
  });
const s3Etag = (parts: Buffer[]) =>
  `"${crypto
    .createHash('md5')
    .update(Buffer.concat(parts.map(md5)))
    .digest('hex')}-${parts.length}"`;

/** Uploads `parts` by hand; returns the upload ID and the listed parts. */
async function uploadParts(key: string, parts: Buffer[]) {
  const { UploadId } = await t.s3.send(new CreateMultipartUploadCommand({ Bucket: t.bucket, Key: key, ContentType: 'application/x-test' }));
  const listed = [];
  for (const [i, body] of parts.entries()) {
    const { ETag } = await t.s3.send(new UploadPartCommand({ Bucket: t.bucket, Key: key, UploadId, PartNumber: i + 1, Body: body }));
    listed.push({ PartNumber: i + 1, ETag });
  }
  return { UploadId: UploadId!, listed };
}

test('lib-storage Upload of 100 MiB in 8 MiB parts: the CID of the whole bytes, S3’s ETag, bytes back', async () => {
  const size = 100 * MiB;
  const before = await used();
  const upload = new Upload({
    client: t.s3,
    params: { Bucket: t.bucket, Key: 'big/100mib.bin', Body: Readable.from(bytes(size, 'mpu-100')) },
    partSize: 8 * MiB,
    queueSize: 4,
  });
  const done = await upload.done();
  const whole = await kuboCid(() => bytes(size, 'mpu-100'));
  const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'big/100mib.bin' }));
  expect(head.Metadata!.cid).toBe(whole);
  expect(head.ContentLength).toBe(size);
  expect(done.ETag).toMatch(/^"[0-9a-f]{32}-13"$/);
  expect(head.ETag).toBe(done.ETag);
  const stored = await t.api.deps.db.objects.get(t.bucket, 'big/100mib.bin');
  expect(stored).toMatchObject({ cid: whole, size, parts: 13 });
  // The parts' reservations became the object's hold: counted once, exactly.
  expect(await used()).toBe(before + size);
  const tail = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'big/100mib.bin', Range: `bytes=${size - MiB}-` }));
  const expected = (await collect(bytes(size, 'mpu-100'))).subarray(size - MiB);
  expect(Buffer.from(await tail.Body!.transformToByteArray()).equals(expected)).toBe(true);
  // The parts are gone once the object is pinned.
  await eventually(
    () => t.api.deps.db.multipart.parts.countDocuments({ uploadId: stored!.uploadId }).exec(),
    (n) => n === 0,
    60_000,
    'parts dropped',
  );
}, 180_000);

test('parts that are not whole MiB are re-chunked: the same CID as the whole bytes', async () => {
  const parts = [crypto.randomBytes(5 * MiB + 7), crypto.randomBytes(5 * MiB), crypto.randomBytes(1)];
  const { UploadId, listed } = await uploadParts('odd.bin', parts);
  const done = await t.s3.send(
    new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'odd.bin', UploadId, MultipartUpload: { Parts: listed } }),
  );
  expect(done.ETag).toBe(s3Etag(parts));
  const whole = await wholeCid(parts);
  expect((await t.api.deps.db.objects.get(t.bucket, 'odd.bin'))!.cid).toBe(whole);
  // A retried completion answers the same.
  const again = await t.s3.send(
    new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'odd.bin', UploadId, MultipartUpload: { Parts: listed } }),
  );
  expect(again.ETag).toBe(done.ETag);
}, 120_000);

test('GET and HEAD ?partNumber=N: the part’s bytes with the object’s ETag and parts count; part 1 of a plain object is all of it', async () => {
  const parts = [crypto.randomBytes(5 * MiB + 3), crypto.randomBytes(1000)];
  const { UploadId, listed } = await uploadParts('by-part.bin', parts);
  await t.s3.send(
    new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'by-part.bin', UploadId, MultipartUpload: { Parts: listed } }),
  );
  for (const [i, part] of parts.entries()) {
    const got = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'by-part.bin', PartNumber: i + 1 }));
    expect(got.$metadata.httpStatusCode).toBe(206);
    expect(got.ETag).toBe(s3Etag(parts));
    expect(got.PartsCount).toBe(2);
    expect(got.ContentLength).toBe(part.length);
    const start = i === 0 ? 0 : parts[0]!.length;
    expect(got.ContentRange).toBe(`bytes ${start}-${start + part.length - 1}/${parts[0]!.length + parts[1]!.length}`);
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(part)).toBe(true);
  }
  const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'by-part.bin', PartNumber: 2 }));
  expect(head.ContentLength).toBe(1000);
  expect(head.PartsCount).toBe(2);
  expect(await s3Failure(t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'by-part.bin', PartNumber: 3 })))).toMatchObject({
    code: 'InvalidPart',
    status: 400,
  });
  expect(
    await s3Failure(t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'by-part.bin', PartNumber: 1, Range: 'bytes=0-9' }))),
  ).toMatchObject({ code: 'InvalidRequest', status: 400 });

  // An object put whole: part 1 is all of it, there is no part 2.
  const plain = crypto.randomBytes(2000);
  await t.s3.send(new PutObjectCommand({ Bucket: t.bucket, Key: 'plain.bin', Body: plain }));
  const whole = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'plain.bin', PartNumber: 1 }));
  expect(whole.$metadata.httpStatusCode).toBe(200);
  expect(Buffer.from(await whole.Body!.transformToByteArray()).equals(plain)).toBe(true);
  expect(await s3Failure(t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'plain.bin', PartNumber: 2 })))).toMatchObject({
    code: 'InvalidPart',
    status: 400,
  });
}, 120_000);

test('part rules: EntityTooSmall at completion, InvalidPart, InvalidPartOrder; ListParts pages; abort gives the bytes back', async () => {
  const before = await used();
  const parts = [crypto.randomBytes(1 * MiB), crypto.randomBytes(2 * MiB), crypto.randomBytes(3000)];
  const { UploadId, listed } = await uploadParts('rules.bin', parts);
  expect(await used()).toBe(before + 3 * MiB + 3000); // parts are reserved as they come
  const complete = (Parts: typeof listed) =>
    t.s3.send(new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'rules.bin', UploadId, MultipartUpload: { Parts } }));
  expect(await s3Failure(complete(listed))).toMatchObject({ code: 'EntityTooSmall', status: 400 });
  expect(await s3Failure(complete([{ PartNumber: 1, ETag: '"0123"' }]))).toMatchObject({ code: 'InvalidPart', status: 400 });
  expect(await s3Failure(complete([listed[1]!, listed[0]!]))).toMatchObject({ code: 'InvalidPartOrder', status: 400 });
  const page1 = await t.s3.send(new ListPartsCommand({ Bucket: t.bucket, Key: 'rules.bin', UploadId, MaxParts: 2 }));
  expect(page1.Parts!.map((p) => [p.PartNumber, p.Size])).toEqual([
    [1, MiB],
    [2, 2 * MiB],
  ]);
  expect(page1.IsTruncated).toBe(true);
  const page2 = await t.s3.send(
    new ListPartsCommand({ Bucket: t.bucket, Key: 'rules.bin', UploadId, PartNumberMarker: page1.NextPartNumberMarker }),
  );
  expect(page2.Parts!.map((p) => p.PartNumber)).toEqual([3]);
  const uploads = await t.s3.send(new ListMultipartUploadsCommand({ Bucket: t.bucket }));
  expect(uploads.Uploads!.map((u) => u.UploadId)).toContain(UploadId);
  await t.s3.send(new AbortMultipartUploadCommand({ Bucket: t.bucket, Key: 'rules.bin', UploadId }));
  expect(await used()).toBe(before);
  expect(await s3Failure(t.s3.send(new ListPartsCommand({ Bucket: t.bucket, Key: 'rules.bin', UploadId })))).toMatchObject({
    code: 'NoSuchUpload',
    status: 404,
  });
  expect(await t.api.deps.db.multipart.parts.countDocuments({ uploadId: UploadId }).exec()).toBe(0);
});

test('a part number listed twice in a row is the part as last uploaded (a part sent again while its first send ran); apart it is InvalidPartOrder', async () => {
  const [first, second, tail] = [crypto.randomBytes(5 * MiB), crypto.randomBytes(5 * MiB), crypto.randomBytes(1000)];
  const { UploadId, listed } = await uploadParts('resent.bin', [first, tail]);
  const again = await t.s3.send(new UploadPartCommand({ Bucket: t.bucket, Key: 'resent.bin', UploadId, PartNumber: 1, Body: second }));
  const complete = (Parts: typeof listed) =>
    t.s3.send(new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'resent.bin', UploadId, MultipartUpload: { Parts } }));
  const resent = { PartNumber: 1, ETag: again.ETag };
  expect(await s3Failure(complete([resent, listed[1]!, resent]))).toMatchObject({ code: 'InvalidPartOrder', status: 400 });
  // The last entry names the part: the first send's ETag listed after the second's is InvalidPart.
  expect(await s3Failure(complete([resent, listed[0]!, listed[1]!]))).toMatchObject({ code: 'InvalidPart', status: 400 });
  const done = await complete([listed[0]!, resent, listed[1]!]);
  expect(done.ETag).toBe(s3Etag([second, tail]));
  const read = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'resent.bin' }));
  expect(Buffer.from(await read.Body!.transformToByteArray()).equals(Buffer.concat([second, tail]))).toBe(true);
  expect(read.Metadata?.cid).toBe(await wholeCid([second, tail]));
  // A retry lists the same parts and gets the same answer.
  expect((await complete([listed[0]!, resent, listed[1]!])).ETag).toBe(done.ETag);
}, 120_000);

test('UploadPartCopy: parts made of ranges of objects; the copy has the CID of the same bytes; ranges, conditions and owners checked', async () => {
  const source = crypto.randomBytes(6 * MiB + 1000);
  await t.s3.send(new PutObjectCommand({ Bucket: t.bucket, Key: 'copy/source.bin', Body: source }));
  const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'copy/source.bin' }));
  const { UploadId } = await t.s3.send(
    new CreateMultipartUploadCommand({ Bucket: t.bucket, Key: 'copy/copied.bin', ChecksumAlgorithm: 'CRC32' }),
  );
  const copy = (PartNumber: number, CopySourceRange?: string, extra: Record<string, string> = {}) =>
    t.s3.send(
      new UploadPartCopyCommand({
        Bucket: t.bucket,
        Key: 'copy/copied.bin',
        UploadId,
        PartNumber,
        CopySource: `${t.bucket}/copy/source.bin`,
        ...(CopySourceRange ? { CopySourceRange } : {}),
        ...extra,
      }),
    );
  const first = await copy(1, `bytes=0-${5 * MiB - 1}`, { CopySourceIfMatch: head.ETag! });
  const second = await copy(2, `bytes=${5 * MiB}-${source.length - 1}`);
  const partOne = source.subarray(0, 5 * MiB);
  const partTwo = source.subarray(5 * MiB);
  expect(first.CopyPartResult!.ETag).toBe(`"${md5(partOne).toString('hex')}"`);
  expect(second.CopyPartResult!.ETag).toBe(`"${md5(partTwo).toString('hex')}"`);
  const crc32 = (data: Buffer) =>
    Buffer.from(new Uint32Array([zlib.crc32(data)]).buffer)
      .reverse()
      .toString('base64');
  expect(first.CopyPartResult!.ChecksumCRC32).toBe(crc32(partOne));

  // Ranges S3 refuses, a condition that fails, another account's source.
  for (const range of ['0-2', 'bytes=0', 'bytes=hello-world', 'bytes=0-bar', 'bytes=hello-', 'bytes=0-2,3-5', 'bytes=5-2']) {
    expect(await s3Failure(copy(3, range))).toMatchObject({ code: 'InvalidArgument', status: 400 });
  }
  expect(await s3Failure(copy(3, `bytes=0-${source.length}`))).toMatchObject({ code: 'InvalidRange' });
  expect(await s3Failure(copy(3, undefined, { CopySourceIfMatch: '"0123"' }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
  expect(await s3Failure(copy(3, undefined, { CopySourceIfNoneMatch: head.ETag! }))).toMatchObject({ code: 'PreconditionFailed' });
  const other = await createUser(t.api, 'bodhi');
  const theirs = s3Client(t.api, other);
  const otherBucket = bucketName('theirs');
  await theirs.send(new CreateBucketCommand({ Bucket: otherBucket }));
  await theirs.send(new PutObjectCommand({ Bucket: otherBucket, Key: 'secret.bin', Body: 'not yours' }));
  expect(
    await s3Failure(
      t.s3.send(
        new UploadPartCopyCommand({
          Bucket: t.bucket,
          Key: 'copy/copied.bin',
          UploadId,
          PartNumber: 3,
          CopySource: `${otherBucket}/secret.bin`,
        }),
      ),
    ),
  ).toMatchObject({ code: 'AccessDenied' });
  theirs.destroy();

  await t.s3.send(
    new CompleteMultipartUploadCommand({
      Bucket: t.bucket,
      Key: 'copy/copied.bin',
      UploadId,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: first.CopyPartResult!.ETag, ChecksumCRC32: first.CopyPartResult!.ChecksumCRC32 },
          { PartNumber: 2, ETag: second.CopyPartResult!.ETag, ChecksumCRC32: second.CopyPartResult!.ChecksumCRC32 },
        ],
      },
    }),
  );
  const got = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: 'copy/copied.bin' }));
  expect(Buffer.from(await got.Body!.transformToByteArray()).equals(source)).toBe(true);
  expect(got.ETag).toBe(s3Etag([partOne, partTwo]));
  // The same bytes, the same CID: the source's.
  const cids = await Promise.all(
    ['copy/source.bin', 'copy/copied.bin'].map(async (k) => (await t.api.deps.db.objects.get(t.bucket, k))!.cid),
  );
  expect(cids[1]).toBe(cids[0]);
  expect(cids[0]).toBe(await wholeCid([source]));
});

test('a worker killed during a completion: the next one completes it, the object is recorded and counted once', async () => {
  const parts = Array.from({ length: 4 }, () => crypto.randomBytes(5 * MiB));
  const { UploadId, listed } = await uploadParts('killed.bin', parts);
  const before = await used();
  await t.worker.kill('SIGKILL');
  const completing = t.s3.send(
    new CompleteMultipartUploadCommand({ Bucket: t.bucket, Key: 'killed.bin', UploadId, MultipartUpload: { Parts: listed } }),
  );
  // The job is started and waits for a worker; the upload is `completing` meanwhile.
  await eventually(
    () => t.api.deps.db.multipart.get(UploadId),
    (u) => u?.state === 'completing',
    30_000,
    'completing',
  );
  t.worker = await startWorkerProcess(t.env);
  const done = await completing;
  expect(done.ETag).toBe(s3Etag(parts));
  const object = await t.api.deps.db.objects.get(t.bucket, 'killed.bin');
  expect(object!.cid).toBe(await wholeCid(parts));
  expect(await used()).toBe(before); // the reservation became the hold, no more
}, 120_000);

test('abandoned uploads are aborted by the cleanup; deleting a bucket aborts its open uploads', async () => {
  const before = await used();
  const { UploadId } = await uploadParts('abandoned.bin', [crypto.randomBytes(1000)]);
  expect(await used()).toBe(before + 1000);
  expect(await cleanAbandonedUploads(t.api.deps, 0)).toBeGreaterThanOrEqual(1);
  expect(await t.api.deps.db.multipart.get(UploadId)).toBeNull();
  expect(await used()).toBe(before);

  const other = bucketName('mpu-del');
  await t.s3.send(new CreateBucketCommand({ Bucket: other }));
  const { UploadId: open } = await t.s3.send(new CreateMultipartUploadCommand({ Bucket: other, Key: 'x' }));
  await t.s3.send(new UploadPartCommand({ Bucket: other, Key: 'x', UploadId: open, PartNumber: 1, Body: 'part' }));
  await t.s3.send(new DeleteBucketCommand({ Bucket: other }));
  expect(await t.api.deps.db.multipart.get(open!)).toBeNull();
  expect(await used()).toBe(before);
});

test('a completion whose bucket is deleted as it records the object takes the object back: NoSuchBucket, the parts and their storage gone', async () => {
  const other = bucketName('mpu-gone');
  await t.s3.send(new CreateBucketCommand({ Bucket: other }));
  const before = await used();
  const { UploadId } = await t.s3.send(new CreateMultipartUploadCommand({ Bucket: other, Key: 'k' }));
  const { ETag } = await t.s3.send(
    new UploadPartCommand({ Bucket: other, Key: 'k', UploadId, PartNumber: 1, Body: crypto.randomBytes(1000) }),
  );
  expect(await used()).toBe(before + 1000);
  // A DeleteBucket that checked the bucket empty, marked it and is about to delete it: the
  // completion's object lands after that check.
  const mark = Date.now();
  expect(await t.api.deps.db.buckets.markDeleting(other, t.user.userId, mark)).toBe(true);
  setTimeout(() => void t.api.deps.db.buckets.delete(other, t.user.userId), 1_000);
  const completion = t.s3.send(
    new CompleteMultipartUploadCommand({ Bucket: other, Key: 'k', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } }),
  );
  expect(await s3Failure(completion)).toMatchObject({ code: 'NoSuchBucket', status: 404 });
  expect(await t.api.deps.db.objects.get(other, 'k')).toBeNull();
  expect(await t.api.deps.db.multipart.listParts(UploadId!, 0, 10)).toEqual([]);
  expect(await used()).toBe(before);
});
