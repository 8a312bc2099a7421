// S3's additional checksums through the AWS SDK's own helpers: every algorithm S3 offers the
// SDK (CRC32, CRC32C, CRC64NVME, SHA1, SHA256) on PutObject, and on multipart uploads with each
// checksum type S3 allows: COMPOSITE (the algorithm over the parts' checksums, `-<parts>`) and
// FULL_OBJECT (the CRC of the whole object). Expected values are computed here from the bytes, and
// the SDK itself validates a full-object checksum of every GetObject it reads.
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  type ChecksumAlgorithm,
  type ChecksumType,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Crc32 } from '@aws-crypto/crc32';
import { Crc32c } from '@aws-crypto/crc32c';
import { Crc64Nvme } from '@aws-sdk/crc64-nvme';
import { MiB } from './support/content.js';
import { s3Failure, s3Suite } from './support/s3.js';

const t = s3Suite('cksum');

type Algorithm = 'CRC32' | 'CRC32C' | 'CRC64NVME' | 'SHA1' | 'SHA256';
/** The raw digest of `data`, computed here (the SDK's CRC classes, Node's hashes). */
async function digest(algorithm: Algorithm, data: Uint8Array): Promise<Buffer> {
  if (algorithm === 'SHA1' || algorithm === 'SHA256') return crypto.createHash(algorithm.toLowerCase()).update(data).digest();
  if (algorithm === 'CRC64NVME') {
    const crc = new Crc64Nvme();
    crc.update(data);
    return Buffer.from(await crc.digest());
  }
  const value = (algorithm === 'CRC32' ? new Crc32() : new Crc32c()).update(data).digest();
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value >>> 0);
  return out;
}
const field = (algorithm: Algorithm) => `Checksum${algorithm}` as const;
const readBack = async (key: string) => {
  const got = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: key, ChecksumMode: 'ENABLED' }));
  return { got, body: Buffer.from(await got.Body!.transformToByteArray()) };
};

test.each(['CRC32', 'CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'] as const)(
  'PutObject with %s, as a header (a Buffer) and as a trailer (a stream): verified, kept, FULL_OBJECT, read back',
  async (algorithm) => {
    const data = crypto.randomBytes(300_000);
    const expected = (await digest(algorithm, data)).toString('base64');
    for (const [key, body] of [
      ['put-header', data],
      ['put-trailer', Readable.from([data.subarray(0, 100_000), data.subarray(100_000)])],
    ] as const) {
      const put = await t.s3.send(
        new PutObjectCommand({ Bucket: t.bucket, Key: key, Body: body, ContentLength: data.length, ChecksumAlgorithm: algorithm }),
      );
      expect(put[field(algorithm)]).toBe(expected);
      const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: key, ChecksumMode: 'ENABLED' }));
      expect(head[field(algorithm)]).toBe(expected);
      expect(head.ChecksumType).toBe('FULL_OBJECT');
      const { got, body: back } = await readBack(key);
      expect(got[field(algorithm)]).toBe(expected);
      expect(back.equals(data)).toBe(true);
      const attributes = await t.s3.send(
        new GetObjectAttributesCommand({ Bucket: t.bucket, Key: key, ObjectAttributes: ['Checksum', 'ObjectSize'] }),
      );
      expect(attributes).toMatchObject({
        Checksum: { [field(algorithm)]: expected, ChecksumType: 'FULL_OBJECT' },
        ObjectSize: data.length,
      });
      expect(attributes.ETag).toBeUndefined(); // only what was asked
    }
    // A value that cannot be the digest is refused like a wrong one.
    const malformed = new PutObjectCommand({ Bucket: t.bucket, Key: 'put-bad', Body: data, [field(algorithm)]: 'bad' });
    expect(await s3Failure(t.s3.send(malformed))).toMatchObject({ code: 'BadDigest', status: 400 });
    // A value of other bytes is BadDigest, named as S3 names it, and nothing is stored.
    const other = (await digest(algorithm, Buffer.from('other bytes'))).toString('base64');
    const refused = await s3Failure(
      t.s3.send(new PutObjectCommand({ Bucket: t.bucket, Key: 'put-bad', Body: data, [field(algorithm)]: other })),
    );
    expect(refused).toMatchObject({
      code: 'BadDigest',
      status: 400,
      message: `The ${algorithm} you specified did not match the calculated checksum.`,
    });
    expect(await t.api.deps.db.objects.get(t.bucket, 'put-bad')).toBeNull();
  },
);

const parts = [crypto.randomBytes(5 * MiB), crypto.randomBytes(5 * MiB), crypto.randomBytes(MiB + 17)];
const whole = Buffer.concat(parts);

/** S3's checksum of the multipart object of `parts`. */
async function multipartChecksum(algorithm: Algorithm, type: ChecksumType): Promise<string> {
  if (type === 'FULL_OBJECT') return (await digest(algorithm, whole)).toString('base64');
  const joined = Buffer.concat(await Promise.all(parts.map((p) => digest(algorithm, p))));
  return `${(await digest(algorithm, joined)).toString('base64')}-${parts.length}`;
}

test.each([
  ['CRC32', undefined, 'COMPOSITE'],
  ['CRC32', 'FULL_OBJECT', 'FULL_OBJECT'],
  ['CRC32C', undefined, 'COMPOSITE'],
  ['CRC32C', 'FULL_OBJECT', 'FULL_OBJECT'],
  ['CRC64NVME', undefined, 'FULL_OBJECT'],
  ['SHA1', undefined, 'COMPOSITE'],
  ['SHA256', undefined, 'COMPOSITE'],
] as const)(
  'lib-storage Upload with %s, type %s: the object is %s, as S3 computes it',
  async (algorithm, asked, type) => {
    const key = `mpu-${algorithm}-${type}`;
    const upload = new Upload({
      client: t.s3,
      params: { Bucket: t.bucket, Key: key, Body: whole, ChecksumAlgorithm: algorithm as ChecksumAlgorithm, ChecksumType: asked },
      partSize: 5 * MiB,
    });
    const done = await upload.done();
    const expected = await multipartChecksum(algorithm, type);
    expect(done).toMatchObject({ [field(algorithm)]: expected, ChecksumType: type });
    const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: key, ChecksumMode: 'ENABLED' }));
    expect(head).toMatchObject({ [field(algorithm)]: expected, ChecksumType: type, ContentLength: whole.length });
    // The SDK checks a full-object checksum against the bytes it reads (a wrong one throws).
    const { got, body } = await readBack(key);
    expect(got[field(algorithm)]).toBe(expected);
    expect(body.equals(whole)).toBe(true);
    // GetObjectAttributes: the checksum without its -<parts>, the parts' count, the size.
    const attributes = await t.s3.send(
      new GetObjectAttributesCommand({
        Bucket: t.bucket,
        Key: key,
        ObjectAttributes: ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'],
      }),
    );
    expect(attributes).toMatchObject({
      ETag: done.ETag!.replace(/"/g, ''),
      Checksum: { [field(algorithm)]: expected.replace(/-3$/, ''), ChecksumType: type },
      ObjectParts: {
        TotalPartsCount: 3,
        IsTruncated: false,
        MaxParts: 1000,
        Parts: await Promise.all(
          parts.map(async (p, i) => ({
            PartNumber: i + 1,
            Size: p.length,
            [field(algorithm)]: (await digest(algorithm, p)).toString('base64'),
          })),
        ),
      },
      StorageClass: 'STANDARD',
      ObjectSize: whole.length,
    });
    // A page of parts after a marker.
    const paged = await t.s3.send(
      new GetObjectAttributesCommand({ Bucket: t.bucket, Key: key, ObjectAttributes: ['ObjectParts'], MaxParts: 1, PartNumberMarker: '1' }),
    );
    expect(paged.ObjectParts).toMatchObject({ PartNumberMarker: '1', NextPartNumberMarker: '2', MaxParts: 1, IsTruncated: true });
    expect(paged.ObjectParts!.Parts!.map((p) => p.PartNumber)).toEqual([2]);
    // GET ?partNumber=N: that part's checksum, with the object's type.
    const second = await t.s3.send(new GetObjectCommand({ Bucket: t.bucket, Key: key, PartNumber: 2, ChecksumMode: 'ENABLED' }));
    await second.Body!.transformToByteArray();
    expect([second[field(algorithm)], second.ChecksumType]).toEqual([(await digest(algorithm, parts[1]!)).toString('base64'), type]);
  },
  120_000,
);

test('multipart checksum rules: the types S3 allows, parts carry the upload’s algorithm, a part’s or the object’s checksum that differs is refused and nothing completes', async () => {
  const create = (algorithm: Algorithm, type?: ChecksumType) =>
    t.s3.send(new CreateMultipartUploadCommand({ Bucket: t.bucket, Key: 'rules', ChecksumAlgorithm: algorithm, ChecksumType: type }));
  expect(await s3Failure(create('CRC64NVME', 'COMPOSITE'))).toMatchObject({
    code: 'InvalidRequest',
    message: 'The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.',
  });
  expect(await s3Failure(create('SHA256', 'FULL_OBJECT'))).toMatchObject({
    code: 'InvalidRequest',
    message: 'The FULL_OBJECT checksum type cannot be used with the sha256 checksum algorithm.',
  });

  const { UploadId } = await create('CRC32C', 'FULL_OBJECT');
  const part = (n: number, extra: object = {}) =>
    t.s3.send(
      new UploadPartCommand({
        Bucket: t.bucket,
        Key: 'rules',
        UploadId,
        PartNumber: n,
        Body: parts[n - 1],
        ChecksumAlgorithm: 'CRC32C',
        ...extra,
      }),
    );
  // A part with another algorithm (the SDK's default CRC32) is refused.
  expect(await s3Failure(part(1, { ChecksumAlgorithm: 'CRC32' }))).toMatchObject({
    code: 'InvalidRequest',
    message: 'Checksum Type mismatch occurred, expected checksum Type: crc32c, actual checksum Type: crc32',
  });
  const answered = [await part(1), await part(2), await part(3)];
  const listed = answered.map((p, i) => ({ PartNumber: i + 1, ETag: p.ETag, ChecksumCRC32C: p.ChecksumCRC32C }));
  expect(listed[0]!.ChecksumCRC32C).toBe((await digest('CRC32C', parts[0]!)).toString('base64'));
  const complete = (list: typeof listed, extra: object = {}) =>
    t.s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: t.bucket,
        Key: 'rules',
        UploadId,
        MultipartUpload: { Parts: list },
        ChecksumType: 'FULL_OBJECT',
        ...extra,
      }),
    );
  // A part's checksum that is not the part's: InvalidPart.
  const wrongPart = listed.map((p, i) => (i === 1 ? { ...p, ChecksumCRC32C: listed[0]!.ChecksumCRC32C } : p));
  expect(await s3Failure(complete(wrongPart))).toMatchObject({ code: 'InvalidPart' });
  // The object's checksum that is not the object's: BadDigest.
  expect(await s3Failure(complete(listed, { ChecksumCRC32C: listed[0]!.ChecksumCRC32C }))).toMatchObject({
    code: 'BadDigest',
    message: 'The crc32c you specified did not match the calculated checksum.',
  });
  // Another checksum type than the upload's: InvalidRequest.
  expect(await s3Failure(complete(listed, { ChecksumType: 'COMPOSITE' }))).toMatchObject({ code: 'InvalidRequest' });
  // Nothing completed: the parts are listed with their checksums, under the upload's algorithm and type.
  const open = await t.s3.send(new ListPartsCommand({ Bucket: t.bucket, Key: 'rules', UploadId }));
  expect(open).toMatchObject({ ChecksumAlgorithm: 'CRC32C', ChecksumType: 'FULL_OBJECT' });
  expect(open.Parts!.map((p) => p.ChecksumCRC32C)).toEqual(listed.map((p) => p.ChecksumCRC32C));
  expect(await t.api.deps.db.objects.get(t.bucket, 'rules')).toBeNull();
  // With the object's own checksum it completes.
  const expected = await multipartChecksum('CRC32C', 'FULL_OBJECT');
  const done = await complete(listed, { ChecksumCRC32C: expected });
  expect(done).toMatchObject({ ChecksumCRC32C: expected, ChecksumType: 'FULL_OBJECT' });
  expect((await readBack('rules')).body.equals(whole)).toBe(true);
}, 120_000);
