// User metadata through S3: by default every object answer also carries the CID as
// `x-amz-meta-cid` (the service's contract, as Filebase answers); with S3_META_CID=false user
// metadata comes back exactly as written, after PutObject, a multipart upload and CopyObject
// (COPY and REPLACE). Either way the CID is in `x-ipfs-path`.
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { ApiServer } from '../api/server.js';
import { s3Client, s3Suite } from './support/s3.js';
import { startTestApi } from './support/stack.js';

const t = s3Suite('meta');
let exact: ApiServer;
let plain: S3Client;

beforeAll(async () => {
  // A second API process with the setting, sharing the first one's master key (its keys' secrets).
  exact = await startTestApi({ ...t.env, S3_META_CID: 'false', MASTER_KEY: t.api.deps.config.masterKey.toString('hex') });
  plain = s3Client(exact, t.user);
});
afterAll(async () => {
  plain?.destroy();
  await exact?.close();
});

const metadata = { foo: 'bar', 'two-words': 'a value' };
const cidOf = async (key: string) => (await t.api.deps.db.objects.get(t.bucket, key))!.cid;
/** The answer's headers of a GetObject, as a browser would see them. */
async function getHeaders(client: S3Client, key: string): Promise<Headers> {
  const res = await fetch(await getSignedUrl(client, new GetObjectCommand({ Bucket: t.bucket, Key: key })));
  await res.arrayBuffer();
  return res.headers;
}

test('by default the CID comes back as user metadata beside the user’s, and in x-ipfs-path', async () => {
  await t.s3.send(new PutObjectCommand({ Bucket: t.bucket, Key: 'default', Body: 'default bytes', Metadata: metadata }));
  const cid = await cidOf('default');
  const head = await t.s3.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'default' }));
  expect(head.Metadata).toEqual({ ...metadata, cid });
  const headers = await getHeaders(t.s3, 'default');
  expect(headers.get('x-amz-meta-cid')).toBe(cid);
  expect(headers.get('x-ipfs-path')).toBe(`/ipfs/${cid}`);
});

test('S3_META_CID=false: user metadata round-trips exactly (PutObject, multipart, CopyObject COPY and REPLACE); the CID is in x-ipfs-path', async () => {
  await plain.send(new PutObjectCommand({ Bucket: t.bucket, Key: 'put', Body: 'put bytes', Metadata: { ...metadata, cid: 'my own' } }));
  expect((await plain.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'put' }))).Metadata).toEqual({ ...metadata, cid: 'my own' });
  const headers = await getHeaders(plain, 'put');
  expect(headers.get('x-ipfs-path')).toBe(`/ipfs/${await cidOf('put')}`);
  expect(headers.get('x-amz-meta-cid')).toBe('my own');

  const { UploadId } = await plain.send(new CreateMultipartUploadCommand({ Bucket: t.bucket, Key: 'mpu', Metadata: metadata }));
  const part = await plain.send(new UploadPartCommand({ Bucket: t.bucket, Key: 'mpu', UploadId, PartNumber: 1, Body: 'one part' }));
  await plain.send(
    new CompleteMultipartUploadCommand({
      Bucket: t.bucket,
      Key: 'mpu',
      UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
    }),
  );
  expect((await plain.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'mpu' }))).Metadata).toEqual(metadata);

  await plain.send(new CopyObjectCommand({ Bucket: t.bucket, Key: 'copied', CopySource: `${t.bucket}/mpu` }));
  expect((await plain.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'copied' }))).Metadata).toEqual(metadata);
  await plain.send(
    new CopyObjectCommand({
      Bucket: t.bucket,
      Key: 'replaced',
      CopySource: `${t.bucket}/mpu`,
      MetadataDirective: 'REPLACE',
      Metadata: { other: 'x' },
    }),
  );
  expect((await plain.send(new HeadObjectCommand({ Bucket: t.bucket, Key: 'replaced' }))).Metadata).toEqual({ other: 'x' });
  expect(await cidOf('replaced')).toBe(await cidOf('mpu'));
}, 60_000);
