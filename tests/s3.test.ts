// The S3 interface with the AWS SDK for JavaScript v3 and its defaults: buckets (global names,
// ownership), objects (bytes, CIDs, ETags, metadata, ranges, conditions), the flat key space
// and its listings, copies without bytes, deletes that release holds, tenancy, and the
// signature and checksum failures. Outcomes are read back: bytes, CIDs, MongoDB, Cluster.
import crypto from 'node:crypto';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  type CopyObjectCommandInput,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketLocationCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectLockConfigurationCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import pLimit from 'p-limit';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/cid.js';
import { CID } from 'multiformats/cid';
import { cluster, kubo } from './support/content.js';
import { bucketName, s3Client, s3Failure } from './support/s3.js';
import { call, createUser, startTestApi, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
let api: ApiServer;
let worker: WorkerProcess;
let alice: TestUser;
let bob: TestUser;
let s3: S3Client;
let bobS3: S3Client;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
  s3 = s3Client(api, alice);
  bobS3 = s3Client(api, bob);
});
afterAll(async () => {
  s3?.destroy();
  bobS3?.destroy();
  await Promise.all([api?.close(), worker?.kill()]);
});

const HELLO_CID = 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e';
const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');
const text = async (out: { Body?: { transformToString(): Promise<string> } }) => out.Body!.transformToString();
const used = (user: TestUser) => api.deps.db.usage.used(user.userId);

async function newBucket(client: S3Client, label: string): Promise<string> {
  const name = bucketName(label);
  await client.send(new CreateBucketCommand({ Bucket: name }));
  return name;
}

describe('buckets', () => {
  test('names are global: your own again is 200 in us-east-1 and BucketAlreadyOwnedByYou elsewhere, another account’s BucketAlreadyExists', async () => {
    const name = await newBucket(s3, 'global');
    await s3.send(new HeadBucketCommand({ Bucket: name }));
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'kept', Body: 'kept' }));
    // S3's legacy rule in us-east-1 (the default region): the owner's create answers 200 and changes nothing.
    await s3.send(new CreateBucketCommand({ Bucket: name }));
    expect((await s3.send(new ListObjectsV2Command({ Bucket: name }))).Contents!.map((o) => o.Key)).toEqual(['kept']);
    const elsewhere = await startTestApi({ ...env, S3_REGION: 'eu-west-1', MASTER_KEY: api.deps.config.masterKey.toString('hex') });
    const there = s3Client(elsewhere, alice);
    try {
      expect(await s3Failure(there.send(new CreateBucketCommand({ Bucket: name })))).toMatchObject({
        code: 'BucketAlreadyOwnedByYou',
        status: 409,
      });
    } finally {
      there.destroy();
      await elsewhere.close();
    }
    expect(await s3Failure(bobS3.send(new CreateBucketCommand({ Bucket: name })))).toMatchObject({
      code: 'BucketAlreadyExists',
      status: 409,
    });
    const mine = (await s3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name);
    const his = (await bobS3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name);
    expect(mine).toContain(name);
    expect(his).not.toContain(name);
    // Backed by a top-level folder of the same name (REST sees it).
    const folders = await call(api, 'GET', '/folders?parentFolderId=root', { key: alice.apiKey });
    expect(folders.body.items.map((f: { name: string }) => f.name)).toContain(name);
    expect((await s3.send(new GetBucketLocationCommand({ Bucket: name }))).LocationConstraint).toBeUndefined();
  });

  test('ListBuckets pages by max-buckets and continuation token, under a prefix', async () => {
    const prefix = `pages-${Math.random().toString(36).slice(2, 8)}-`;
    const names = [`${prefix}a`, `${prefix}b`];
    for (const name of names) await s3.send(new CreateBucketCommand({ Bucket: name }));
    const first = await s3.send(new ListBucketsCommand({ Prefix: prefix, MaxBuckets: 1 }));
    expect(first.Buckets!.map((b) => b.Name)).toEqual([names[0]]);
    expect(first.ContinuationToken).toBeDefined();
    const second = await s3.send(new ListBucketsCommand({ Prefix: prefix, MaxBuckets: 1, ContinuationToken: first.ContinuationToken }));
    expect([second.Buckets!.map((b) => b.Name), second.ContinuationToken]).toEqual([[names[1]], undefined]);
    expect((await s3.send(new ListBucketsCommand({ Prefix: prefix }))).Buckets!.map((b) => b.Name)).toEqual(names);
  });

  test('invalid names are InvalidBucketName; a missing bucket is NoSuchBucket', async () => {
    for (const bad of ['ab', 'UPPER', 'has_underscore', '-dash', '192.168.1.1', 'a..b', 'x'.repeat(64), 'dot.-dash', 'dash-.dot']) {
      expect(await s3Failure(s3.send(new CreateBucketCommand({ Bucket: bad })))).toMatchObject({ code: 'InvalidBucketName', status: 400 });
    }
    expect(await s3Failure(s3.send(new ListObjectsV2Command({ Bucket: bucketName('missing') })))).toMatchObject({
      code: 'NoSuchBucket',
      status: 404,
    });
  });

  test('another account’s bucket is AccessDenied for every call, its contents never shown', async () => {
    const name = await newBucket(s3, 'tenancy');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'secret.txt', Body: 'for alice only' }));
    for (const attempt of [
      bobS3.send(new GetObjectCommand({ Bucket: name, Key: 'secret.txt' })),
      bobS3.send(new ListObjectsV2Command({ Bucket: name })),
      bobS3.send(new PutObjectCommand({ Bucket: name, Key: 'x', Body: 'x' })),
      bobS3.send(new DeleteObjectCommand({ Bucket: name, Key: 'secret.txt' })),
      bobS3.send(new DeleteBucketCommand({ Bucket: name })),
    ]) {
      const failure = await s3Failure(attempt);
      expect(failure).toMatchObject({ code: 'AccessDenied', status: 403 });
      expect(failure.message).not.toContain('alice only');
    }
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: name, Key: 'secret.txt' })))).toBe('for alice only');
  });

  test('a bucket with objects is BucketNotEmpty; emptied, it goes', async () => {
    const name = await newBucket(s3, 'delete');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'v' }));
    expect(await s3Failure(s3.send(new DeleteBucketCommand({ Bucket: name })))).toMatchObject({ code: 'BucketNotEmpty', status: 409 });
    await s3.send(new DeleteObjectCommand({ Bucket: name, Key: 'k' }));
    await s3.send(new DeleteBucketCommand({ Bucket: name }));
    expect(await s3Failure(s3.send(new HeadBucketCommand({ Bucket: name })))).toMatchObject({ status: 404 });
    expect(await api.deps.db.buckets.get(name)).toBeNull();
  });

  test('a bucket deleted while an object’s body comes keeps no object: the PUT is NoSuchBucket, the name’s next owner finds nothing, the storage is given back', async () => {
    // A user of its own (the nirvana plan's request rate) leaves alice's for the tests after.
    const carol = await createUser(api, 'nirvana');
    const client = s3Client(api, carol);
    const name = await newBucket(client, 'racing');
    const before = await used(carol);
    const data = crypto.randomBytes(300_000);
    const body = new PassThrough();
    body.write(data.subarray(0, 100_000));
    const put = s3Failure(client.send(new PutObjectCommand({ Bucket: name, Key: 'late', Body: body, ContentLength: data.length })));
    // The PUT has found its bucket and is reading the body when the bucket goes, empty.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await client.send(new DeleteBucketCommand({ Bucket: name }));
    await bobS3.send(new CreateBucketCommand({ Bucket: name }));
    body.end(data.subarray(100_000));
    expect(await put).toMatchObject({ code: 'NoSuchBucket', status: 404 });
    expect((await bobS3.send(new ListObjectsV2Command({ Bucket: name }))).KeyCount).toBe(0);
    expect(await api.deps.db.objects.get(name, 'late')).toBeNull();
    expect(await used(carol)).toBe(before);
  });

  test('an object written while DeleteBucket decides waits for it: kept when the bucket stays', async () => {
    const carol = await createUser(api, 'nirvana');
    const client = s3Client(api, carol);
    const name = await newBucket(client, 'marked');
    const mark = Date.now();
    // A delete between its mark and its decision (buckets.ts deleteBucket), which then finds the
    // bucket not empty and takes its mark back.
    expect(await api.deps.db.buckets.markDeleting(name, carol.userId, mark)).toBe(true);
    const started = Date.now();
    const put = client.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'kept' }));
    setTimeout(() => void api.deps.db.buckets.unmarkDeleting(name, mark), 500);
    await put;
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(await text(await client.send(new GetObjectCommand({ Bucket: name, Key: 'k' })))).toBe('kept');
  });

  test('Object Lock: a bucket asked for with it is refused; the calls answer as in a bucket made without it', async () => {
    const locked = bucketName('locked');
    expect(await s3Failure(s3.send(new CreateBucketCommand({ Bucket: locked, ObjectLockEnabledForBucket: true })))).toMatchObject({
      code: 'NotImplemented',
      status: 501,
    });
    expect(await api.deps.db.buckets.get(locked)).toBeNull();
    const name = await newBucket(s3, 'nolock');
    await s3.send(new PutObjectCommand({ Bucket: name, Key: 'k', Body: 'v' }));
    const config = { ObjectLockEnabled: 'Enabled' as const, Rule: { DefaultRetention: { Mode: 'GOVERNANCE' as const, Days: 1 } } };
    expect(
      await s3Failure(s3.send(new PutObjectLockConfigurationCommand({ Bucket: name, ObjectLockConfiguration: config }))),
    ).toMatchObject({
      code: 'InvalidBucketState',
      status: 409,
    });
    expect(await s3Failure(s3.send(new GetObjectLockConfigurationCommand({ Bucket: name })))).toMatchObject({
      code: 'ObjectLockConfigurationNotFoundError',
      status: 404,
    });
    expect(await s3Failure(s3.send(new GetObjectRetentionCommand({ Bucket: name, Key: 'k' })))).toMatchObject({
      code: 'InvalidRequest',
      status: 400,
    });
    expect(await s3Failure(s3.send(new PutObjectLegalHoldCommand({ Bucket: name, Key: 'k', LegalHold: { Status: 'ON' } })))).toMatchObject({
      code: 'InvalidRequest',
      status: 400,
    });
    // Another account's bucket stays AccessDenied.
    expect(await s3Failure(bobS3.send(new GetObjectRetentionCommand({ Bucket: name, Key: 'k' })))).toMatchObject({ code: 'AccessDenied' });
  });
});

describe('objects', () => {
  let bucket: string;
  beforeAll(async () => {
    bucket = await newBucket(s3, 'objects');
  });

  test('PutObject with the SDK’s defaults: the profile’s CID, the MD5 ETag, bytes and metadata back, pinned in Cluster', async () => {
    const before = await used(alice);
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'docs/hello.txt',
        Body: 'hello world',
        ContentType: 'text/plain',
        Metadata: { colour: 'blue' },
      }),
    );
    expect(put.ETag).toBe(`"${md5('hello world')}"`);
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'docs/hello.txt' }));
    expect(await text(got)).toBe('hello world');
    expect(got.ContentType).toBe('text/plain');
    expect(got.Metadata).toEqual({ colour: 'blue', cid: HELLO_CID });
    expect(got.ETag).toBe(put.ETag);
    const record = await api.deps.db.objects.get(bucket, 'docs/hello.txt');
    expect(record).toMatchObject({ cid: HELLO_CID, size: 11, userId: alice.userId });
    expect(record!.checksums.crc32).toBeDefined(); // the SDK's trailer, verified and kept
    expect(await used(alice)).toBe(before + 11);
    await eventually(
      async () => (await cluster().allocations()).some((a) => parseCid(a.cid).v1 === HELLO_CID),
      Boolean,
      30_000,
      'pinned in Cluster',
    );
  });

  test('ranges, conditions and response overrides', async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'range.txt', Body: '0123456789' }));
    const part = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=2-5' }));
    expect(await text(part)).toBe('2345');
    expect(part.ContentRange).toBe('bytes 2-5/10');
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=-3' })))).toBe('789');
    expect(await s3Failure(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', Range: 'bytes=20-30' })))).toMatchObject({
      code: 'InvalidRange',
      status: 416,
    });
    const etag = `"${md5('0123456789')}"`;
    expect(await s3Failure(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfNoneMatch: etag })))).toMatchObject({
      status: 304,
    });
    expect(await s3Failure(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', IfMatch: '"nope"' })))).toMatchObject({
      code: 'PreconditionFailed',
      status: 412,
    });
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'range.txt', IfMatch: etag }));
    expect(head.ContentLength).toBe(10);
    const renamed = await s3.send(
      new GetObjectCommand({ Bucket: bucket, Key: 'range.txt', ResponseContentDisposition: 'attachment; filename="x.txt"' }),
    );
    expect(renamed.ContentDisposition).toBe('attachment; filename="x.txt"');
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'absent' })))).toMatchObject({ status: 404 });
  });

  test('a flat key space: a/b, a/b/c and a/ coexist; listings roll up by delimiter and page by token and marker', async () => {
    const b = await newBucket(s3, 'flat');
    const keys = ['a/', 'a/b', 'a/b/c', 'a/b/d', 'b', 'c/x', 'caf\u00e9 +%.txt'];
    for (const key of keys) await s3.send(new PutObjectCommand({ Bucket: b, Key: key, Body: `data of ${key}` }));
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'a/' })))).toBe('data of a/');
    const all = await s3.send(new ListObjectsV2Command({ Bucket: b }));
    expect(all.Contents!.map((o) => o.Key)).toEqual([...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
    const top = await s3.send(new ListObjectsV2Command({ Bucket: b, Delimiter: '/' }));
    expect(top.Contents!.map((o) => o.Key)).toEqual(['b', 'caf\u00e9 +%.txt']);
    expect(top.CommonPrefixes!.map((p) => p.Prefix)).toEqual(['a/', 'c/']);
    const inA = await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'a/', Delimiter: '/' }));
    expect(inA.Contents!.map((o) => o.Key)).toEqual(['a/', 'a/b']);
    expect(inA.CommonPrefixes!.map((p) => p.Prefix)).toEqual(['a/b/']);
    // Pages of 2 by continuation token, then by start-after.
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: b, MaxKeys: 2, ContinuationToken: token }));
      seen.push(...page.Contents!.map((o) => o.Key!));
      token = page.NextContinuationToken;
      expect(page.IsTruncated).toBe(token !== undefined);
    } while (token);
    expect(seen).toEqual(all.Contents!.map((o) => o.Key));
    // An empty token is none: the listing from the start, the token echoed.
    const fromStart = await s3.send(new ListObjectsV2Command({ Bucket: b, ContinuationToken: '' }));
    expect([fromStart.ContinuationToken, fromStart.Contents!.map((o) => o.Key)]).toEqual(['', all.Contents!.map((o) => o.Key)]);
    expect((await s3.send(new ListObjectsV2Command({ Bucket: b, StartAfter: 'a/b/d' }))).Contents!.map((o) => o.Key)).toEqual([
      'b',
      'c/x',
      'caf\u00e9 +%.txt',
    ]);
    // No keys asked for: an empty page, not truncated (v2 and v1).
    const none = await s3.send(new ListObjectsV2Command({ Bucket: b, MaxKeys: 0 }));
    expect([none.IsTruncated, none.KeyCount, none.Contents, none.NextContinuationToken]).toEqual([false, 0, undefined, undefined]);
    const noneV1 = await s3.send(new ListObjectsCommand({ Bucket: b, MaxKeys: 0 }));
    expect([noneV1.IsTruncated, noneV1.Contents, noneV1.NextMarker]).toEqual([false, undefined, undefined]);
    // v1 with a delimiter: markers past a common prefix do not list it again.
    const v1 = await s3.send(new ListObjectsCommand({ Bucket: b, Delimiter: '/', MaxKeys: 1 }));
    expect(v1).toMatchObject({ IsTruncated: true, NextMarker: 'a/', CommonPrefixes: [{ Prefix: 'a/' }] });
    const v1next = await s3.send(new ListObjectsCommand({ Bucket: b, Delimiter: '/', Marker: v1.NextMarker }));
    expect(v1next.Contents!.map((o) => o.Key)).toEqual(['b', 'caf\u00e9 +%.txt']);
    expect(v1next.CommonPrefixes!.map((p) => p.Prefix)).toEqual(['c/']);
    // encoding-type=url (botocore asks for it on every listing): names go out encoded, but v1's
    // Prefix as it was sent, as S3 gives it (botocore does not decode it there).
    const encodedV2 = await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'caf', Delimiter: ' ', EncodingType: 'url' }));
    expect([encodedV2.EncodingType, encodedV2.Prefix, encodedV2.Delimiter, encodedV2.CommonPrefixes]).toEqual([
      'url',
      'caf',
      '%20',
      [{ Prefix: 'caf%C3%A9%20' }],
    ]);
    const encodedV1 = await s3.send(new ListObjectsCommand({ Bucket: b, Prefix: 'caf\u00e9 ', EncodingType: 'url', Marker: 'a b' }));
    expect([encodedV1.EncodingType, encodedV1.Prefix, encodedV1.Marker, encodedV1.Contents!.map((o) => o.Key)]).toEqual([
      'url',
      'caf\u00e9 ',
      'a%20b',
      ['caf%C3%A9%20%2B%25.txt'],
    ]);
    // A newline, on the wire (the SDK's XML parser trims values; botocore's does not).
    const newline = await fetch(await getSignedUrl(s3, new ListObjectsCommand({ Bucket: b, Prefix: '\n', EncodingType: 'url' })));
    expect(await newline.text()).toContain('<Prefix>\n</Prefix>');
    expect(await s3Failure(s3.send(new ListObjectsV2Command({ Bucket: b, EncodingType: 'base64' as 'url' })))).toMatchObject({
      code: 'InvalidArgument',
    });
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: b, Prefix: 'a/b/' }));
    expect(versions.Versions!.map((v) => [v.Key, v.VersionId, v.IsLatest])).toEqual([
      ['a/b/c', 'null', true],
      ['a/b/d', 'null', true],
    ]);
  });

  test('CopyObject copies no bytes: the same CID and ETag, counted once; DeleteObjects releases holds', async () => {
    const b = await newBucket(s3, 'copy');
    const body = crypto.randomBytes(3000);
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'one', Body: body, Metadata: { a: '1' } }));
    const before = await used(alice);
    const copied = await s3.send(new CopyObjectCommand({ Bucket: b, Key: 'two', CopySource: `${b}/one` }));
    expect(copied.CopyObjectResult!.ETag).toBe(`"${md5(body)}"`);
    const [one, two] = await Promise.all([api.deps.db.objects.get(b, 'one'), api.deps.db.objects.get(b, 'two')]);
    expect(two!.cid).toBe(one!.cid);
    expect(JSON.parse(two!.meta)).toEqual({ a: '1' });
    expect(await used(alice)).toBe(before); // the same content, held twice, counts once
    const gone = await s3.send(
      new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'one' }, { Key: 'two' }, { Key: 'never' }] } }),
    );
    expect(gone.Deleted!.map((d) => d.Key).sort()).toEqual(['never', 'one', 'two']);
    expect(await used(alice)).toBe(before - 3000);
    expect(await api.deps.db.holds.of(one!.multihash)).toMatchObject({ holders: [] });
    expect(await s3Failure(s3.send(new GetObjectCommand({ Bucket: b, Key: 'one' })))).toMatchObject({ code: 'NoSuchKey', status: 404 });
  });

  test("DeleteObjects of many keys (deleted several at once) answers in the request's order: deleted keys, and the keys whose condition failed", async () => {
    // A user of its own on a plan whose request rate (6,000 a minute) leaves alice's for the tests after.
    const client = s3Client(api, await createUser(api, 'nirvana'));
    const b = await newBucket(client, 'delmany');
    const keys = Array.from({ length: 60 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    await Promise.all(keys.map((Key) => client.send(new PutObjectCommand({ Bucket: b, Key, Body: `bytes of ${b}/${Key}` }))));
    const refused = new Set(keys.filter((_, i) => i % 7 === 3));
    // Reversed, so that the request's order is not the keys' order.
    const asked = [...keys].reverse();
    const res = await client.send(
      new DeleteObjectsCommand({
        Bucket: b,
        Delete: { Objects: asked.map((Key) => (refused.has(Key) ? { Key, ETag: '"0123456789abcdef0123456789abcdef"' } : { Key })) },
      }),
    );
    expect(res.Deleted!.map((d) => d.Key)).toEqual(asked.filter((k) => !refused.has(k)));
    expect(res.Errors!.map((e) => [e.Key, e.Code])).toEqual(asked.filter((k) => refused.has(k)).map((k) => [k, 'PreconditionFailed']));
    const left = await client.send(new ListObjectsV2Command({ Bucket: b }));
    expect(left.Contents!.map((o) => o.Key)).toEqual(keys.filter((k) => refused.has(k)));
  });

  test('CopyObject honours the x-amz-copy-source-if-* conditions: a failing one is PreconditionFailed and copies nothing', async () => {
    const b = await newBucket(s3, 'cond');
    const put = await s3.send(new PutObjectCommand({ Bucket: b, Key: 'src', Body: 'conditional source' }));
    const etag = put.ETag!;
    const hourAgo = new Date(Date.now() - 3_600_000);
    const inAnHour = new Date(Date.now() + 3_600_000);
    const copy = (Key: string, conditions: Partial<CopyObjectCommandInput>) =>
      s3.send(new CopyObjectCommand({ Bucket: b, Key, CopySource: `${b}/src`, ...conditions }));
    for (const [n, conditions] of [
      { CopySourceIfMatch: '"0123456789abcdef0123456789abcdef"' },
      { CopySourceIfNoneMatch: etag },
      { CopySourceIfUnmodifiedSince: hourAgo },
      { CopySourceIfModifiedSince: inAnHour },
      // If-Match holds, so If-Unmodified-Since is not looked at; If-None-Match fails first.
      { CopySourceIfMatch: etag, CopySourceIfNoneMatch: etag },
    ].entries()) {
      expect(await s3Failure(copy(`refused-${n}`, conditions))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
      expect(await api.deps.db.objects.get(b, `refused-${n}`)).toBeNull();
    }
    for (const [n, conditions] of [
      { CopySourceIfMatch: etag },
      { CopySourceIfNoneMatch: '"0123456789abcdef0123456789abcdef"' },
      { CopySourceIfUnmodifiedSince: inAnHour },
      { CopySourceIfModifiedSince: hourAgo },
      // S3's pairs: If-Match true with If-Unmodified-Since false copies, as does If-None-Match
      // true with If-Modified-Since false.
      { CopySourceIfMatch: etag, CopySourceIfUnmodifiedSince: hourAgo },
      { CopySourceIfNoneMatch: '"0123456789abcdef0123456789abcdef"', CopySourceIfModifiedSince: inAnHour },
    ].entries()) {
      expect((await copy(`copied-${n}`, conditions)).CopyObjectResult!.ETag).toBe(etag);
      expect((await api.deps.db.objects.get(b, `copied-${n}`))?.etag).toBe(etag.replace(/"/g, ''));
    }
  });

  test('a bucket of 1,001 keys fills and pages in seconds: 1,000 keys, then the last one', async () => {
    // A plan whose request rate (6,000 a minute) leaves the 1,001 PUTs unthrottled.
    const client = s3Client(api, await createUser(api, 'nirvana'));
    const b = await newBucket(client, 'thousand');
    const keys = Array.from({ length: 1001 }, (_, i) => `k${String(i).padStart(4, '0')}`);
    const started = Date.now();
    const limit = pLimit(16);
    await Promise.all(keys.map((Key) => limit(() => client.send(new PutObjectCommand({ Bucket: b, Key, Body: `small object ${Key}` })))));
    const filled = Date.now() - started;
    const first = await client.send(new ListObjectsV2Command({ Bucket: b }));
    expect([first.KeyCount, first.IsTruncated]).toEqual([1000, true]);
    const second = await client.send(new ListObjectsV2Command({ Bucket: b, ContinuationToken: first.NextContinuationToken }));
    expect([second.KeyCount, second.IsTruncated, second.Contents!.map((o) => o.Key)]).toEqual([1, false, ['k1000']]);
    expect([...first.Contents!, ...second.Contents!].map((o) => o.Key)).toEqual(keys);
    const total = Date.now() - started;
    process.stdout.write(`[s3] 1,001 small PUTs (16 at once) in ${filled} ms; filled and listed in ${total} ms\n`);
    expect(total).toBeLessThan(60_000);
    client.destroy();
  }, 120_000);

  test('conditional writes: If-Match and If-None-Match on PutObject, CompleteMultipartUpload, DeleteObject(s)', async () => {
    const b = await newBucket(s3, 'cond');
    const put = (extra: { IfMatch?: string; IfNoneMatch?: string }, body = 'v') =>
      s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: body, ...extra }));
    // No object yet: If-Match is NoSuchKey, If-None-Match * writes.
    expect(await s3Failure(put({ IfMatch: '*' }))).toMatchObject({ code: 'NoSuchKey', status: 404 });
    const first = (await put({ IfNoneMatch: '*' }, 'one')).ETag!;
    expect(await s3Failure(put({ IfNoneMatch: '*' }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(put({ IfNoneMatch: first }))).toMatchObject({ code: 'PreconditionFailed' });
    expect(await s3Failure(put({ IfMatch: '"0123"' }))).toMatchObject({ code: 'PreconditionFailed' });
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe('one'); // nothing written
    const second = (await put({ IfMatch: first }, 'two')).ETag!;
    // A multipart completion under the same conditions, checked when it completes.
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'k' }));
    const { ETag } = await s3.send(new UploadPartCommand({ Bucket: b, Key: 'k', UploadId, PartNumber: 1, Body: 'three' }));
    const complete = (extra: { IfMatch?: string; IfNoneMatch?: string }) =>
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: b,
          Key: 'k',
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] },
          ...extra,
        }),
      );
    expect(await s3Failure(complete({ IfMatch: first }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    await complete({ IfMatch: second });
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe('three');
    // Deletes: another ETag is refused; no object, nothing to refuse.
    expect(await s3Failure(s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: first })))).toMatchObject({
      code: 'PreconditionFailed',
    });
    const refused = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', ETag: first }] } }));
    expect(refused.Errors!.map((e) => [e.Key, e.Code])).toEqual([['k', 'PreconditionFailed']]);
    const current = (await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' }))).ETag!;
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: current }));
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' })))).toMatchObject({ status: 404 });
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: first }));
    const none = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', ETag: first }] } }));
    expect(none.Errors ?? []).toEqual([]);
  });

  test('conditional writes are atomic: of racing writes on one key, exactly those the key allowed win', async () => {
    const b = await newBucket(s3, 'race');
    // The ETag of a write that won, the error's code of one that lost.
    const status = (p: Promise<{ ETag?: string }>) =>
      p.then(
        (r) => r.ETag!,
        (err: { Code?: string; name: string }) => err.Code ?? err.name,
      );
    const put = (body: string, extra: { IfMatch?: string; IfNoneMatch?: string }) =>
      status(s3.send(new PutObjectCommand({ Bucket: b, Key: 'k', Body: body, ...extra })));
    // 12 creates of a key that has no object: one writes, every other finds it there.
    const creates = await Promise.all(Array.from({ length: 12 }, (_, i) => put(`create ${i}`, { IfNoneMatch: '*' })));
    const created = creates.filter((r) => r !== 'PreconditionFailed');
    expect([created.length, creates.length - created.length]).toEqual([1, 11]);
    const winner = creates.indexOf(created[0]!);
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe(`create ${winner}`);
    // 12 updates that each require that object: one replaces it, the others see another ETag.
    const updates = await Promise.all(Array.from({ length: 12 }, (_, i) => put(`update ${i}`, { IfMatch: created[0]! })));
    const updated = updates.filter((r) => r !== 'PreconditionFailed');
    expect(updated).toHaveLength(1);
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'k' })))).toBe(`update ${updates.indexOf(updated[0]!)}`);
    // A copy onto the key under If-None-Match * is refused too, and a conditional delete of an old ETag.
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'src', Body: 'source' }));
    expect(
      await s3Failure(s3.send(new CopyObjectCommand({ Bucket: b, Key: 'k', CopySource: `${b}/src`, IfNoneMatch: '*' }))),
    ).toMatchObject({
      code: 'PreconditionFailed',
      status: 412,
    });
    const copied = await s3.send(new CopyObjectCommand({ Bucket: b, Key: 'k', CopySource: `${b}/src`, IfMatch: updated[0]! }));
    expect(copied.CopyObjectResult?.ETag).toBe(`"${md5('source')}"`);
    expect(await s3Failure(s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', IfMatch: updated[0]! })))).toMatchObject({
      code: 'PreconditionFailed',
    });
    // The size and time a delete may name (x-amz-if-match-size, x-amz-if-match-last-modified-time).
    const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' }));
    const del = (extra: { IfMatchSize?: number; IfMatchLastModifiedTime?: Date }) =>
      s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'k', ...extra }));
    expect(await s3Failure(del({ IfMatchSize: 9999 }))).toMatchObject({ code: 'PreconditionFailed', status: 412 });
    expect(await s3Failure(del({ IfMatchLastModifiedTime: new Date(2015, 0, 1) }))).toMatchObject({ code: 'PreconditionFailed' });
    const many = await s3.send(new DeleteObjectsCommand({ Bucket: b, Delete: { Objects: [{ Key: 'k', Size: 9999 }] } }));
    expect(many.Errors!.map((e) => e.Code)).toEqual(['PreconditionFailed']);
    await del({ IfMatchSize: head.ContentLength!, IfMatchLastModifiedTime: head.LastModified! });
    expect(await s3Failure(s3.send(new HeadObjectCommand({ Bucket: b, Key: 'k' })))).toMatchObject({ status: 404 });
    await del({ IfMatchSize: 9999 }); // no object: nothing to refuse
    // Two multipart uploads of one new key completed at once under If-None-Match: *: both pass
    // the check when asked, one object is recorded, and the other upload is open again, its
    // parts kept: completing it without the condition replaces the object.
    const uploads = await Promise.all(
      ['first', 'second'].map(async (body) => {
        const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'mpu' }));
        const { ETag } = await s3.send(new UploadPartCommand({ Bucket: b, Key: 'mpu', UploadId, PartNumber: 1, Body: body }));
        return { UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } };
      }),
    );
    const completions = await Promise.all(
      uploads.map((u) => status(s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'mpu', IfNoneMatch: '*', ...u })))),
    );
    expect(completions.filter((c) => c === 'PreconditionFailed')).toHaveLength(1);
    const loser = uploads[completions.indexOf('PreconditionFailed')]!;
    const bodies = ['first', 'second'];
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'mpu' })))).toBe(
      bodies[1 - completions.indexOf('PreconditionFailed')],
    );
    expect(
      (await s3.send(new ListPartsCommand({ Bucket: b, Key: 'mpu', UploadId: loser.UploadId }))).Parts!.map((p) => p.PartNumber),
    ).toEqual([1]);
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'mpu', ...loser }));
    expect(await text(await s3.send(new GetObjectCommand({ Bucket: b, Key: 'mpu' })))).toBe(
      bodies[completions.indexOf('PreconditionFailed')],
    );
    // Every refused write gave back what it reserved: the counters equal a recount of the records.
    const compared = await api.deps.db.usage.compare(alice.userId);
    expect(compared?.stored).toEqual(compared?.fromRecords);
  });

  test('a wrong checksum is BadDigest and nothing is kept', async () => {
    const failure = await s3Failure(
      s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'bad-crc', Body: 'some bytes', ChecksumCRC32: 'AAAAAA==' })),
    );
    expect(failure).toMatchObject({ code: 'BadDigest', status: 400 });
    const md5Failure = await s3Failure(
      s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: 'bad-md5',
          Body: 'some bytes',
          ContentMD5: crypto.createHash('md5').update('other').digest('base64'),
        }),
      ),
    );
    expect(md5Failure).toMatchObject({ code: 'BadDigest', status: 400 });
    // Well-formed values of the other algorithms, of other bytes, as S3 answers them.
    const other = (algorithm: string) => crypto.createHash(algorithm).update('other').digest('base64');
    for (const [Key, wrong] of [
      ['bad-sha256', { ChecksumSHA256: other('sha256') }],
      ['bad-sha1', { ChecksumSHA1: other('sha1') }],
      ['bad-crc32c', { ChecksumCRC32C: 'AAAAAA==' }],
    ] as const) {
      expect(await s3Failure(s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'some bytes', ...wrong })))).toMatchObject({
        code: 'BadDigest',
        status: 400,
      });
      expect(await api.deps.db.objects.get(bucket, Key)).toBeNull();
    }
    expect(await api.deps.db.objects.get(bucket, 'bad-crc')).toBeNull();
    expect(await api.deps.db.objects.get(bucket, 'bad-md5')).toBeNull();
  });

  test('a small object read once is answered from memory by its CID; a key written again answers its new bytes', async () => {
    const [first, second] = [crypto.randomBytes(1000), crypto.randomBytes(1000)];
    const read = async () =>
      Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept.bin' }))).Body!.transformToByteArray());
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.bin', Body: first }));
    const { cid } = (await api.deps.db.objects.get(bucket, 'kept.bin'))!;
    expect(await read()).toEqual(first);
    // The bytes leave Kubo (Cluster's pin first, then the block): only the memory has them now.
    await cluster().unpin(cid);
    await eventually(
      async () => {
        try {
          for await (const removed of kubo().block.rm(CID.parse(cid))) if (removed.error) return false;
          return true;
        } catch {
          return false; // still pinned: Cluster unpins in the background
        }
      },
      Boolean,
      30_000,
      'the block removed from Kubo',
    );
    expect(await read()).toEqual(first);
    // The key is read from its record each time, so new bytes are never answered with the old.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.bin', Body: second }));
    expect(await read()).toEqual(second);
  });

  test('a read of an object of the caller’s does not read its bucket; another account’s record under the name is NoSuchKey', async () => {
    const client = s3Client(api, await createUser(api, 'nirvana'));
    const bucket = await newBucket(client, 'reads');
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'own.txt', Body: 'own' }));
    const model = api.deps.db.buckets.model;
    let bucketReads = 0;
    const find = model.find;
    model.find = ((...args: unknown[]) => {
      bucketReads++;
      return (find as (...a: unknown[]) => unknown).apply(model, args);
    }) as typeof model.find;
    try {
      expect(await text(await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'own.txt' })))).toBe('own');
      expect(bucketReads).toBe(0);
      expect(await s3Failure(client.send(new GetObjectCommand({ Bucket: bucket, Key: 'none.txt' })))).toMatchObject({ code: 'NoSuchKey' });
      expect(bucketReads).toBe(1);
    } finally {
      model.find = find;
    }
    // As a bucket deleted under a racing write left them before writes looked at their bucket.
    const own = (await api.deps.db.objects.get(bucket, 'own.txt'))!;
    await api.deps.db.objects.model.collection.insertOne({
      ...own,
      _id: `${bucket}/left.txt`,
      key: 'left.txt',
      userId: bob.userId,
    } as never);
    expect(await s3Failure(client.send(new GetObjectCommand({ Bucket: bucket, Key: 'left.txt' })))).toMatchObject({
      code: 'NoSuchKey',
      status: 404,
    });
    await api.deps.db.objects.model.collection.deleteOne({ _id: `${bucket}/left.txt` } as never);
  });
});

test('virtual-host style: <bucket>.<S3_DOMAIN> names the bucket', async () => {
  // Every name resolves to loopback here, as a wildcard DNS record would.
  const agent = new http.Agent({
    lookup: ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
      options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4)) as never,
  });
  const port = new URL(api.s3Url).port;
  const vhost = s3Client(api, alice, { endpoint: `http://localhost:${port}`, forcePathStyle: false, requestHandler: { httpAgent: agent } });
  const name = await newBucket(s3, 'vhost');
  await vhost.send(new PutObjectCommand({ Bucket: name, Key: 'by/host.txt', Body: 'virtual host' }));
  expect(await text(await s3.send(new GetObjectCommand({ Bucket: name, Key: 'by/host.txt' })))).toBe('virtual host');
  expect((await vhost.send(new ListObjectsV2Command({ Bucket: name }))).Contents!.map((o) => o.Key)).toEqual(['by/host.txt']);
  vhost.destroy();
});

describe('credentials', () => {
  test('a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, a deleted key too', async () => {
    const forged = s3Client(api, { ...alice, apiKey: `${alice.apiKey.slice(0, -1)}${alice.apiKey.endsWith('x') ? 'y' : 'x'}` });
    expect(await s3Failure(forged.send(new ListBucketsCommand({})))).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
    const unknown = s3Client(api, { ...alice, keyPrefix: 'stp_AAAAAAAA' });
    expect(await s3Failure(unknown.send(new ListBucketsCommand({})))).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const carol = await createUser(api);
    const second = await call(api, 'POST', '/apikeys', { key: carol.apiKey, body: { name: 'second' } });
    const temporary = { ...carol, apiKey: second.body.apiKey, keyPrefix: second.body.keyPrefix };
    const client = s3Client(api, temporary);
    await client.send(new ListBucketsCommand({}));
    expect((await call(api, 'DELETE', `/apikeys/${temporary.keyPrefix}`, { key: carol.apiKey })).status).toBeLessThan(300);
    expect(await s3Failure(client.send(new ListBucketsCommand({})))).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const skewed = s3Client(api, alice, { systemClockOffset: -3600_000 });
    expect(await s3Failure(skewed.send(new ListBucketsCommand({})))).toMatchObject({ code: 'RequestTimeTooSkewed', status: 403 });
  });

  test('every error is S3’s XML document; unknown methods too', async () => {
    const res = await fetch(`${api.s3Url}/`, { method: 'PATCH' });
    expect(res.status).toBe(405);
    const body = await res.text();
    expect(res.headers.get('content-type')).toBe('application/xml');
    expect(body).toMatch(/<Error><Code>MethodNotAllowed<\/Code><Message>[^<]+<\/Message>.*<RequestId>[0-9A-F]+<\/RequestId><\/Error>/s);
    const anonymous = await fetch(`${api.s3Url}/`);
    expect(anonymous.status).toBe(403);
    expect(await anonymous.text()).toContain('<Code>AccessDenied</Code>');
  });
});
