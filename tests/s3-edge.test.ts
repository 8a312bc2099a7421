// S3 GetObject through the edge (edge/caddyfile.ts, api/s3/edge.ts): every read is asked
// of the API process directly and through the edge with the AWS SDK's defaults (which checks the
// object's CRC32), and the two answers must be the same — status, every header the SDK reads,
// bytes — for small, large and multipart objects, ranges, parts, conditions, presigned URLs
// with overrides and errors. Kubo's gateway is reached through a recorder: a large object's bytes
// come from it by the edge (never relayed by Node), a small one's from the API's memory.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  GetObjectTorrentCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type GetObjectCommandInput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { startEdgedApi, type EdgedApi } from './support/edge.js';
import { recordingKubo, type RecordingKubo } from './support/kubo-relay.js';
import { bucketName, s3Client, s3Failure } from './support/s3.js';
import { createUser, type TestUser } from './support/stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let edged: EdgedApi;
let kubo: RecordingKubo;
let worker: WorkerProcess;
let user: TestUser;
let direct: S3Client;
let viaEdge: S3Client;
const bucket = bucketName('edge');

const client = (endpoint: string, who: TestUser, secret = who.apiKey) =>
  s3Client(edged.api, who, { endpoint, credentials: { accessKeyId: who.keyPrefix, secretAccessKey: secret } });

const objects = {
  small: { key: 'small.txt', body: randomBytes(1000) },
  large: { key: 'dir/a b+c%25é(1).bin', body: randomBytes(300 * 1024) },
  multi: { key: 'multi.bin', parts: [randomBytes(5 * 1024 * 1024), randomBytes(100 * 1024)] },
};

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
  kubo = await recordingKubo();
  [edged, worker] = await Promise.all([startEdgedApi(env, { kuboGateway: kubo.url }), startWorkerProcess(env)]);
  user = await createUser(edged.api, 'bodhi');
  direct = client(edged.api.s3Url, user);
  viaEdge = client(`http://127.0.0.1:${edged.ports.s3}`, user);
  await viaEdge.send(new CreateBucketCommand({ Bucket: bucket }));
  const details = { CacheControl: 'max-age=60', ContentDisposition: 'attachment; filename="x.bin"', Metadata: { color: 'blue' } };
  for (const { key, body } of [objects.small, objects.large]) {
    await viaEdge.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'text/x-stupa', ...details }));
  }
  const { UploadId } = await viaEdge.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: objects.multi.key, ContentType: 'text/x-stupa', ...details }),
  );
  const parts = [];
  for (const [i, body] of objects.multi.parts.entries()) {
    const { ETag } = await viaEdge.send(
      new UploadPartCommand({ Bucket: bucket, Key: objects.multi.key, UploadId, PartNumber: i + 1, Body: body }),
    );
    parts.push({ ETag, PartNumber: i + 1 });
  }
  await viaEdge.send(
    new CompleteMultipartUploadCommand({ Bucket: bucket, Key: objects.multi.key, UploadId, MultipartUpload: { Parts: parts } }),
  );
}, 120_000);

afterAll(async () => {
  direct?.destroy();
  viaEdge?.destroy();
  await Promise.all([edged?.close(), worker?.kill()]);
  await kubo?.close();
});

// Bodies are compared by digest: jest's deep equality walks a Buffer byte by byte, and for
// megabytes blocks the process (the API's too) for seconds.
type Answer = { status: number; fields?: Record<string, unknown>; sha256?: string; code?: string };

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A GetObject as the SDK sees it: the output's fields (every header it reads) and the bytes, or the error. */
async function get(s3: S3Client, input: Omit<GetObjectCommandInput, 'Bucket'>): Promise<Answer> {
  try {
    const { Body, $metadata, ...fields } = await s3.send(new GetObjectCommand({ Bucket: bucket, ...input }));
    return { status: $metadata.httpStatusCode!, fields, sha256: sha256(await Body!.transformToByteArray()) };
  } catch (err) {
    const e = err as { name: string; Code?: string; $metadata?: { httpStatusCode?: number } };
    return { status: e.$metadata?.httpStatusCode ?? 0, code: e.Code ?? e.name };
  }
}

const bodyOf = (name: keyof typeof objects) => {
  const object = objects[name];
  return 'body' in object ? object.body : Buffer.concat(object.parts);
};

describe.each(['small', 'large', 'multi'] as const)('GetObject of a %s object', (name) => {
  const key = objects[name].key;
  const cases: [string, Omit<GetObjectCommandInput, 'Bucket' | 'Key'>][] = [
    ['whole', {}],
    ['a range', { Range: 'bytes=100-299' }],
    ['a suffix range', { Range: 'bytes=-10' }],
    ['an open range', { Range: 'bytes=1000-' }],
    ['a range past the end', { Range: 'bytes=99999999-' }],
    ['part 1', { PartNumber: 1 }],
    ['part 2', { PartNumber: 2 }],
    ['an ETag it has', { IfNoneMatch: '*' }],
    ['a failed If-Match', { IfMatch: '"nope"' }],
    ['modified since yesterday', { IfModifiedSince: new Date(Date.now() - 86_400_000) }],
    ['overridden headers', { ResponseContentType: 'image/x-test', ResponseCacheControl: 'no-cache' }],
  ];
  test.each(cases)('%s: the same answer directly and through the edge', async (_label, input) => {
    const want = await get(direct, { Key: key, ...input });
    const got = await get(viaEdge, { Key: key, ...input });
    expect(got).toEqual(want);
    if (want.status === 200 && !input.PartNumber) expect(want.sha256).toBe(sha256(bodyOf(name)));
    if (input.Range === 'bytes=100-299') expect(got.sha256).toBe(sha256(bodyOf(name).subarray(100, 300)));
  });
});

test("a large object's bytes come from Kubo by the edge, a small one's from the API; Kubo gets no reader's headers", async () => {
  kubo.seen.length = 0;
  await get(viaEdge, { Key: objects.small.key });
  expect(kubo.seen).toEqual([]);
  const ranged = await get(viaEdge, { Key: objects.large.key, Range: 'bytes=5-9', IfMatch: '*' });
  expect(ranged.sha256).toBe(sha256(objects.large.body.subarray(5, 10)));
  expect(kubo.seen).toHaveLength(1);
  const [seen] = kubo.seen;
  expect(seen!.url).toMatch(/^\/ipfs\/baf[a-z0-9]+\??$/);
  expect(seen!.headers.range).toBe('bytes=5-9');
  expect(Object.keys(seen!.headers).filter((h) => /^(x-amz|x-stupa|authorization|accept$|if-|x-forwarded)/.test(h))).toEqual([]);
});

test('a presigned GET with response overrides: every header and byte the same directly and through the edge', async () => {
  const command = new GetObjectCommand({ Bucket: bucket, Key: objects.large.key, ResponseContentDisposition: 'inline' });
  // What differs by nature between two answers, or between two servers' HTTP framing.
  const own = new Set(['date', 'x-amz-request-id', 'x-amz-id-2', 'server', 'connection', 'keep-alive', 'via']);
  const answers = [];
  for (const s3 of [direct, viaEdge]) {
    const res = await fetch(await getSignedUrl(s3, command, { expiresIn: 60 }));
    answers.push({
      status: res.status,
      headers: Object.fromEntries([...res.headers].filter(([name]) => !own.has(name))),
      sha256: sha256(new Uint8Array(await res.arrayBuffer())),
    });
  }
  expect(answers[1]).toEqual(answers[0]);
  expect(answers[0]!.headers).toMatchObject({ 'content-disposition': 'inline', 'x-amz-meta-color': 'blue', 'content-length': '307200' });
  expect(answers[0]!.sha256).toBe(sha256(objects.large.body));
});

test('user metadata keeps its lowercase names on the wire through the edge (botocore reads the names as they arrive)', async () => {
  for (const key of [objects.small.key, objects.large.key]) {
    for (const method of ['GET', 'HEAD']) {
      const url = new URL(
        await getSignedUrl(
          viaEdge,
          method === 'GET' ? new GetObjectCommand({ Bucket: bucket, Key: key }) : new HeadObjectCommand({ Bucket: bucket, Key: key }),
          { expiresIn: 60 },
        ),
      );
      const names = await new Promise<string[]>((resolve, reject) => {
        http
          .request(url, { method }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.rawHeaders.filter((_, i) => i % 2 === 0)));
          })
          .on('error', reject)
          .end();
      });
      expect(names.filter((n) => /^x-amz-meta-/i.test(n))).toEqual(expect.arrayContaining(['x-amz-meta-color']));
      expect(names.filter((n) => /^x-amz-meta-/i.test(n) && n !== n.toLowerCase())).toEqual([]);
    }
  }
});

test("errors are the API's own through the edge: no such key, a wrong signature, another account's bucket", async () => {
  const other = await createUser(edged.api, 'bodhi');
  const pairs: [S3Client, S3Client][] = [
    [direct, viaEdge],
    [client(edged.api.s3Url, user, 'wrong'), client(`http://127.0.0.1:${edged.ports.s3}`, user, 'wrong')],
    [client(edged.api.s3Url, other), client(`http://127.0.0.1:${edged.ports.s3}`, other)],
  ];
  const codes = [];
  for (const [i, [a, b]] of pairs.entries()) {
    const key = i === 0 ? 'no/such/key' : objects.large.key;
    const want = await get(a, { Key: key });
    expect(await get(b, { Key: key })).toEqual(want);
    codes.push(want.code);
  }
  expect(codes).toEqual(['NoSuchKey', 'SignatureDoesNotMatch', expect.stringMatching(/^(AccessDenied|NoSuchBucket)$/)]);
});

test('GetObjectTorrent is NotImplemented, directly and through the edge, never the bytes as a torrent', async () => {
  for (const s3 of [direct, viaEdge]) {
    for (const key of [objects.small.key, objects.large.key]) {
      expect(await s3Failure(s3.send(new GetObjectTorrentCommand({ Bucket: bucket, Key: key })))).toMatchObject({
        code: 'NotImplemented',
        status: 501,
      });
    }
  }
});

test("Kubo failing under a large object's read: 503 ServiceUnavailable in S3's shape, without the object's headers", async () => {
  kubo.failWith = 500;
  try {
    const got = await get(viaEdge, { Key: objects.large.key });
    expect([got.status, got.code]).toEqual([503, 'ServiceUnavailable']);
    const url = await getSignedUrl(viaEdge, new GetObjectCommand({ Bucket: bucket, Key: objects.large.key }), { expiresIn: 60 });
    const res = await fetch(url);
    expect([res.status, res.headers.get('content-type'), res.headers.get('retry-after')]).toEqual([503, 'application/xml', '5']);
    expect([res.headers.get('etag'), res.headers.get('x-amz-meta-color')]).toEqual([null, null]);
    expect(await res.text()).toContain('<Code>ServiceUnavailable</Code>');
  } finally {
    kubo.failWith = null;
  }
});

/**
 * A PUT with Expect: 100-continue on a connection kept alive, sent the way clients send it: the
 * headers, then the body only once the server says 100 Continue. Returns the status lines of the
 * answers in order, once the final one is whole, and whether the server then closed the connection
 * (within 2 s; not waited for without `awaitClose`).
 */
async function putExpectingContinue(url: URL, body: Buffer, awaitClose = true): Promise<{ statuses: string[]; closed: boolean }> {
  const socket = net.connect(Number(url.port), url.hostname);
  let received = '';
  socket.setTimeout(10_000, () =>
    socket.destroy(new Error(`no whole answer in 10 s from ${url.host}${url.pathname}: ${JSON.stringify(received.slice(0, 200))}`)),
  );
  socket.write(
    `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
  );
  let sent = false;
  const ended = new Promise<boolean>((resolve) => {
    socket.on('end', () => resolve(true));
    socket.on('close', () => resolve(false));
  });
  try {
    const statuses = await new Promise<string[]>((resolve, reject) => {
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('latin1');
        if (!sent && /^HTTP\/1\.1 100 /.test(received) && received.includes('\r\n\r\n')) {
          sent = true;
          socket.write(body);
        }
        // The final answer: its head, and as many bytes after it as its Content-Length says.
        const final = /HTTP\/1\.1 [2-5]\d\d [^]*?\r\n\r\n/.exec(received);
        const length = final && /\r\ncontent-length: (\d+)/i.exec(final[0]);
        if (final && length && received.length >= final.index + final[0].length + Number(length[1])) {
          resolve([...received.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1]!));
        }
      });
      socket.on('error', reject);
    });
    const closed = awaitClose && (await Promise.race([ended, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2000))]));
    return { statuses, closed };
  } finally {
    socket.destroy();
  }
}

test('Expect: 100-continue: the API refuses before asking for the body and closes the connection; through the edge Caddy asks for it first', async () => {
  const body = randomBytes(256 * 1024);
  const url = (port: number | string, key: string) => new URL(`http://127.0.0.1:${port}/${bucket}/${key}`);
  // No signature. The API's own port answers 403 at once and closes: the client holds a body it
  // will not send, which the connection would otherwise read as its next request.
  expect(await putExpectingContinue(url(new URL(edged.api.s3Url).port, 'refused'), body)).toEqual({ statuses: ['403'], closed: true });
  // Caddy answers 100 Continue before it relays anything; the API reads the body and refuses it.
  // Sent again and again: a refusal racing Caddy's relay of the body once left both sides
  // waiting, or answered 503 (edge/caddy/continue.go).
  for (let i = 0; i < 100; i++) {
    expect([i, (await putExpectingContinue(url(edged.ports.s3, `refused-${i}`), body, false)).statuses]).toEqual([i, ['100', '403']]);
  }
  for (const s3 of [direct, viaEdge]) {
    const key = `continue-${s3 === direct ? 'direct' : 'edge'}.bin`;
    const signed = new URL(await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: key }), { expiresIn: 60 }));
    // Through the edge, Caddy's 100 Continue (the API is not asked again: edge/caddyfile.ts).
    const { statuses } = await putExpectingContinue(signed, body);
    expect(statuses).toEqual(['100', '200']);
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(body));
  }
});
