// S3 objects with the AWS SDK for JavaScript v3 and its defaults: bytes, CIDs, ETags, metadata,
// ranges, conditions on reads, the flat key space and its listings, copies without bytes,
// deletes that release holds, checksum failures, small objects from memory. Outcomes are read
// back: bytes, CIDs, MongoDB, Cluster. Buckets, virtual hosts and credentials are
// tests/s3-buckets.test.ts; conditional writes tests/s3-conditions.test.ts.
import crypto from 'node:crypto';
import {
  CopyObjectCommand,
  type CopyObjectCommandInput,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import pLimit from 'p-limit';
import { parseCid } from '../infra/ipfs/cid.js';
import { cluster } from './support/content.js';
import { s3Client, s3Failure } from './support/s3.js';
import { recordingKubo } from './support/kubo-relay.js';
import { createUser, startTestApi } from './support/stack.js';
import { eventually } from './support/worker.js';
import { alice, api, bob, env, HELLO_CID, md5, newBucket, s3, text, used, useS3Accounts } from './support/s3-accounts.js';
import { rawExchange } from './support/raw.js';

useS3Accounts();

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
    // An API process reading through a relay that records what reaches Kubo's gateway. (Not by
    // removing the block from the stack's Kubo: its `block rm` waits for Kubo's GC lock, and
    // while it waits every pin of every test waits too.)
    const relay = await recordingKubo();
    // The same master key: S3 checks signatures with the key's sealed secret.
    const reader = await startTestApi({ ...env, KUBO_GATEWAY_URL: relay.url, MASTER_KEY: api.deps.config.masterKey.toString('hex') });
    const client = s3Client(reader, alice);
    try {
      const [first, second] = [crypto.randomBytes(1000), crypto.randomBytes(1000)];
      const read = async () =>
        Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept.bin' }))).Body!.transformToByteArray());
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.bin', Body: first }));
      const { cid } = (await api.deps.db.objects.get(bucket, 'kept.bin'))!;
      expect(await read()).toEqual(first);
      expect(relay.seen.map((r) => r.url)).toEqual([`/ipfs/${cid}`]);
      // Read again: from memory, Kubo is not asked.
      expect(await read()).toEqual(first);
      expect(relay.seen).toHaveLength(1);
      // The key is read from its record each time, so new bytes are never answered with the old.
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept.bin', Body: second }));
      const next = (await api.deps.db.objects.get(bucket, 'kept.bin'))!.cid;
      expect(await read()).toEqual(second);
      expect(relay.seen.map((r) => r.url)).toEqual([`/ipfs/${cid}`, `/ipfs/${next}`]);
    } finally {
      client.destroy();
      await reader.close();
      await relay.close();
    }
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

test("requests Node cannot parse, and CONNECT, are S3's XML errors on the S3 port", async () => {
  const port = Number(new URL(api.s3Url).port);
  const garbage = await rawExchange(port, 'THIS IS NOT HTTP\r\n\r\n');
  expect([garbage.status, garbage.headers['content-type']]).toEqual([400, 'application/xml']);
  expect(garbage.body).toMatch(/<Error><Code>InvalidRequest<\/Code><Message>the HTTP request could not be parsed \(HPE_/);
  const hostless = await rawExchange(port, 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n');
  expect([hostless.status, hostless.headers['content-type']]).toEqual([400, 'application/xml']);
  expect(hostless.body).toContain(
    '<Code>InvalidRequest</Code><Message>the HTTP request could not be parsed (missing required Host header)',
  );
  const tunnel = await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
  expect([tunnel.status, tunnel.headers['content-type']]).toEqual([405, 'application/xml']);
  expect(tunnel.body).toContain('<Code>MethodNotAllowed</Code>');
});
