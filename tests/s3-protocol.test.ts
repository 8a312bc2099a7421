// The S3 protocol kit (api/s3: auth.ts, body.ts, xml.ts, errors.ts) against real clients:
// the AWS SDK for JavaScript v3 (defaults, WHEN_REQUIRED, path and virtual-host style,
// presigned URLs), and requests and aws-chunked bodies built here with node:crypto from the
// SigV4 specification, checked first against AWS's published example. A tiny node:http
// server in the test authenticates, decodes, and answers what it verified. No stack needed.
import crypto from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { authenticate, type Authenticated } from '../api/s3/auth.js';
import { decodeBody, readSmallBody, type BodyResult } from '../api/s3/body.js';
import { asS3Error, S3Error } from '../api/s3/errors.js';
import { errorXml, parseXml, toXml } from '../api/s3/xml.js';

const KEY_ID = 'STUPATESTKEY';
const SECRET = 'test/secret+key=42';
// AWS's example credentials, of its published SigV4 streaming example.
const EXAMPLE_ID = 'AKIAIOSFODNN7EXAMPLE';
const EXAMPLE_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const SECRETS: Record<string, string> = { [KEY_ID]: SECRET, [EXAMPLE_ID]: EXAMPLE_SECRET };

interface Seen {
  host?: string;
  auth?: Authenticated;
  result?: BodyResult;
  error?: S3Error;
  parts?: unknown[];
  consumer?: { ended: boolean; errored: string | null; bytes: number; md5: string };
}
const seen: Seen[] = [];
const last = () => seen[seen.length - 1]!;
let clock: () => number = Date.now;
let endpoint: string;
let server: http.Server;
let s3: S3Client;

function xmlAnswer(res: ServerResponse, root: string, body: object): void {
  res.writeHead(200, { 'content-type': 'application/xml' });
  res.end(toXml(root, body));
}

/** What the S3 server will do with the kit: authenticate, decode, answer S3 XML or an S3 error. */
async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(`http://s3${req.url}`);
  const entry: Seen = { host: req.headers.host };
  seen.push(entry);
  try {
    const auth = (entry.auth = await authenticate(req, url, async (id) => SECRETS[id] ?? null, clock()));
    const query = url.searchParams;
    if (req.method === 'POST' && query.has('delete')) {
      const doc = parseXml(await readSmallBody(req, auth, 64 * 1024), ['Delete.Object']) as any;
      return xmlAnswer(res, 'DeleteResult', { Deleted: doc.Delete.Object.map((o: { Key: string }) => ({ Key: o.Key })) });
    }
    if (req.method === 'POST' && query.has('uploads'))
      return xmlAnswer(res, 'InitiateMultipartUploadResult', { Bucket: 'b', Key: 'k', UploadId: 'up/1+=' });
    if (req.method === 'POST' && query.has('uploadId')) {
      const doc = parseXml(await readSmallBody(req, auth, 64 * 1024), ['CompleteMultipartUpload.Part']) as any;
      entry.parts = doc.CompleteMultipartUpload.Part;
      return xmlAnswer(res, 'CompleteMultipartUploadResult', { Bucket: 'b', Key: 'k', ETag: '"abc-1"' });
    }
    if (req.method === 'PUT') {
      const { stream, result } = decodeBody(req, auth, { maxBytes: auth.path.includes('/small/') ? 1000 : 2 * 1024 ** 3 });
      const consumer = (entry.consumer = { ended: false as boolean, errored: null as string | null, bytes: 0, md5: '' });
      const md5 = auth.path.includes('/big/') ? null : crypto.createHash('md5');
      stream.on('end', () => (consumer.ended = true));
      stream.on('error', (err) => (consumer.errored = (err as S3Error).code ?? err.message));
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          md5?.update(chunk);
          consumer.bytes += chunk.length;
          callback();
        },
      });
      await pipeline(stream, sink);
      consumer.md5 = md5?.digest('hex') ?? '';
      const body = (entry.result = await result);
      const checksums = Object.entries(body.checksums).map(([name, value]) => [`x-amz-checksum-${name}`, value]);
      res.writeHead(200, { etag: `"${body.md5.toString('hex')}"`, ...Object.fromEntries(checksums) });
      return void res.end();
    }
    if (query.get('list-type') === '2') {
      const prefix = query.get('prefix') ?? '';
      return xmlAnswer(res, 'ListBucketResult', {
        Name: 'bkt',
        Prefix: prefix,
        KeyCount: 1,
        MaxKeys: 1000,
        IsTruncated: false,
        Contents: [{ Key: `${prefix}x`, LastModified: new Date(0), ETag: '"e"', Size: 1, StorageClass: 'STANDARD' }],
      });
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: auth.path, host: req.headers.host, region: auth.region, presigned: auth.presigned, query: [...query] }));
  } catch (err) {
    const error = (entry.error = asS3Error(err));
    res.writeHead(error.status, { 'content-type': 'application/xml', ...error.headers });
    res.end(errorXml(error, (req.url ?? '/').split('?')[0]!, 'test-request'));
    req.resume();
  }
}

beforeAll(async () => {
  server = http.createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  s3 = client();
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
afterEach(() => (clock = Date.now));

function client(config: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: KEY_ID, secretAccessKey: SECRET },
    ...config,
  });
}

async function failure(promise: Promise<unknown>): Promise<{ name: string; message: string; status?: number }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
  throw new Error('expected the request to fail');
}

/** An S3 error answer, parsed. */
async function errorOf(res: Response): Promise<{ status: number; code: string; message: string; doc: any }> {
  const doc = parseXml(await res.text()) as any;
  return { status: res.status, code: doc.Error.Code, message: doc.Error.Message, doc: doc.Error };
}

const md5hex = (data: crypto.BinaryLike) => crypto.createHash('md5').update(data).digest('hex');
const b64 = (name: 'sha1' | 'sha256' | 'md5', data: crypto.BinaryLike) => crypto.createHash(name).update(data).digest('base64');
const crc32b64 = (data: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data) >>> 0);
  return out.toString('base64');
};
const sha256hex = (data: crypto.BinaryLike) => crypto.createHash('sha256').update(data).digest('hex');
const hmac = (key: crypto.BinaryLike, data: string) => crypto.createHmac('sha256', key).update(data).digest();
const amzDate = (ms = Date.now()) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');

// ---- SigV4 written here from the specification, independent of api/s3/auth.ts ----

interface Signed {
  headers: Record<string, string>;
  seed: string;
  key: Buffer;
  scope: string;
  date: string;
}

function signV4(opts: {
  method: string;
  path: string;
  query?: string;
  headers: Record<string, string>;
  payloadHash: string;
  date?: string;
  id?: string;
  secret?: string;
}): Signed {
  const date = opts.date ?? amzDate();
  const scope = `${date.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const headers: Record<string, string> = { ...opts.headers, 'x-amz-date': date, 'x-amz-content-sha256': opts.payloadHash };
  const names = Object.keys(headers).sort();
  const canonical = [
    opts.method,
    opts.path,
    opts.query ?? '',
    ...names.map((n) => `${n}:${headers[n]!.trim()}`),
    '',
    names.join(';'),
    opts.payloadHash,
  ].join('\n');
  const key = ['us-east-1', 's3', 'aws4_request'].reduce(
    (k, part) => hmac(k, part),
    hmac(`AWS4${opts.secret ?? SECRET}`, date.slice(0, 8)),
  );
  const seed = hmac(key, ['AWS4-HMAC-SHA256', date, scope, sha256hex(canonical)].join('\n')).toString('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${opts.id ?? KEY_ID}/${scope}, SignedHeaders=${names.join(';')}, Signature=${seed}`;
  return { headers, seed, key, scope, date };
}

/** aws-chunked framing; signed chunks (and a signed trailer) when `signed` is given. */
function chunked(data: Buffer, chunkSize: number, signed?: Signed, trailer?: [string, string]): { body: Buffer; signatures: string[] } {
  const parts: Buffer[] = [];
  const signatures: string[] = [];
  let previous = signed?.seed ?? '';
  for (let offset = 0; ; offset += chunkSize) {
    const piece = data.subarray(offset, Math.min(offset + chunkSize, data.length));
    let extension = '';
    if (signed) {
      const sts = ['AWS4-HMAC-SHA256-PAYLOAD', signed.date, signed.scope, previous, sha256hex(''), sha256hex(piece)].join('\n');
      previous = hmac(signed.key, sts).toString('hex');
      signatures.push(previous);
      extension = `;chunk-signature=${previous}`;
    }
    parts.push(Buffer.from(`${piece.length.toString(16)}${extension}\r\n`), piece);
    if (piece.length === 0) break;
    parts.push(Buffer.from('\r\n'));
  }
  if (trailer) {
    parts.push(Buffer.from(`${trailer[0]}:${trailer[1]}\r\n`));
    if (signed) {
      const sts = ['AWS4-HMAC-SHA256-TRAILER', signed.date, signed.scope, previous, sha256hex(`${trailer[0]}:${trailer[1]}\n`)].join('\n');
      parts.push(Buffer.from(`x-amz-trailer-signature:${hmac(signed.key, sts).toString('hex')}\r\n`));
    }
  }
  parts.push(Buffer.from('\r\n'));
  return { body: Buffer.concat(parts), signatures };
}

/** A raw request to the test server; the body a Buffer or a stream. */
function send(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | Readable,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${endpoint}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    if (body instanceof Readable) body.pipe(req);
    else req.end(body);
  });
}
const codeOf = (text: string) => (parseXml(text) as any).Error?.Code as string | undefined;

describe('xml and errors', () => {
  test('toXml: S3 namespace on the root, repeated elements, escaping, dates; errorXml without namespace', () => {
    const xml = toXml('ListBucketResult', {
      Name: 'a&b',
      Contents: [{ Key: '<k>' }, { Key: ' x ' }],
      When: new Date(0),
      Gone: undefined,
      T: true,
    });
    expect(xml).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>a&amp;b</Name>' +
        '<Contents><Key>&lt;k&gt;</Key></Contents><Contents><Key> x </Key></Contents><When>1970-01-01T00:00:00.000Z</When><T>true</T></ListBucketResult>',
    );
    const error = new S3Error('NoSuchUpload', undefined, { UploadId: 'u1' });
    expect(error.status).toBe(404);
    expect(errorXml(error, '/b/k', 'r1')).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>' +
        'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.' +
        '</Message><UploadId>u1</UploadId><Resource>/b/k</Resource><RequestId>r1</RequestId></Error>',
    );
    const internal = asS3Error(new Error('secret detail'));
    expect([internal.code, internal.status, errorXml(internal, '/', 'r').includes('secret')]).toEqual(['InternalError', 500, false]);
  });

  test('parseXml: listed paths are arrays even with one element, values are untrimmed strings, entities decoded once', () => {
    const doc = parseXml(
      '<?xml version="1.0"?>\n<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">\n  <Part>\n    <PartNumber>01</PartNumber>\n' +
        '    <ETag>"e&amp;lt;"</ETag>\n  </Part>\n  <Note> a&#x0A;b&#65; </Note><Empty/>\n</CompleteMultipartUpload>',
      ['CompleteMultipartUpload.Part'],
    );
    expect(doc).toEqual({ CompleteMultipartUpload: { Part: [{ PartNumber: '01', ETag: '"e&lt;"' }], Note: ' a\nbA ', Empty: '' } });
  });

  test.each([
    ['not well-formed', '<a><b></a>', 'MalformedXML'],
    ['a DTD (entity expansion)', '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xx">]><a>&x;</a>', 'MalformedXML'],
    ['too large', `<a>${'x'.repeat(2048)}</a>`, 'EntityTooLarge'],
    ['empty', '', 'MalformedXML'],
  ])('parseXml refuses %s', (_what, text, code) => {
    expect(() => parseXml(text, [], 1024)).toThrow(expect.objectContaining({ code }));
  });
});

describe('SigV4 with the AWS SDK', () => {
  const KEYS = [
    'plain.txt',
    'with space.txt',
    'plus+sign',
    'percent%41',
    'unicodé/日本語/ключ',
    'tilde~',
    "bang!'()*",
    'emoji 😀',
    '//double',
    'trailing/',
    'a/../b',
    'semi;comma,eq=amp&at@dollar$',
    'q?mark#hash',
  ];

  test.each(KEYS)('key %j: PutObject and GetObject (path style) verify, and the raw path gives the key back', async (key) => {
    const put = await s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: key, Body: 'x' }));
    expect(put.ETag).toBe(`"${md5hex('x')}"`);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'bkt', Key: key }));
    const info = JSON.parse(await got.Body!.transformToString());
    expect(decodeURIComponent(info.path.slice('/bkt/'.length))).toBe(key);
  });

  test('virtual-host style: the bucket in the signed Host header, any region', async () => {
    const agent = new http.Agent({
      lookup: ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
        options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4)) as never,
    });
    const vhost = client({
      region: 'eu-central-1',
      endpoint: endpoint.replace('127.0.0.1', 's3.stupa.test'),
      forcePathStyle: false,
      requestHandler: { httpAgent: agent },
    });
    await vhost.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'dir/with space', Body: 'v' }));
    const got = await vhost.send(new GetObjectCommand({ Bucket: 'bkt', Key: 'dir/with space' }));
    expect(JSON.parse(await got.Body!.transformToString())).toMatchObject({
      path: '/dir/with%20space',
      region: 'eu-central-1',
      host: expect.stringMatching(/^bkt\.s3\.stupa\.test:/),
    });
    agent.destroy();
  });

  test('query strings: ?list-type=2 with encoded values, ?uploads, ?partNumber&uploadId, CompleteMultipartUpload with one part', async () => {
    const list = await s3.send(
      new ListObjectsV2Command({ Bucket: 'bkt', Prefix: 'a/b c+d&é', Delimiter: '/', ContinuationToken: 'tok/+=', StartAfter: '~' }),
    );
    expect(list.Contents?.[0]).toMatchObject({ Key: 'a/b c+d&éx', Size: 1, LastModified: new Date(0) });
    expect(last().auth!.path).toBe('/bkt/');
    const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'bkt', Key: 'multi part' }));
    expect(upload.UploadId).toBe('up/1+=');
    const part = await s3.send(
      new UploadPartCommand({ Bucket: 'bkt', Key: 'multi part', UploadId: upload.UploadId, PartNumber: 1, Body: 'part one' }),
    );
    expect(part.ETag).toBe(`"${md5hex('part one')}"`);
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'bkt',
        Key: 'multi part',
        UploadId: upload.UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    expect(done.ETag).toBe('"abc-1"');
    expect(last().parts).toEqual([expect.objectContaining({ PartNumber: '1', ETag: part.ETag })]);
  });

  test('?delete: the XML body is verified (its checksum) and keys with XML specials, spaces and newlines come back intact', async () => {
    const keys = ['a&b<c>', ' lead and trail ', 'new\nline\r', `quote"apos'`, 'plain'];
    const res = await s3.send(new DeleteObjectsCommand({ Bucket: 'bkt', Delete: { Objects: keys.map((Key) => ({ Key })) } }));
    expect(res.Deleted?.map((d) => d.Key)).toEqual(keys);
    expect(Object.keys(last().auth!.hoisted)).toEqual([]);
    // Past readSmallBody's limit: EntityTooLarge.
    const many = Array.from({ length: 2000 }, (_, i) => ({ Key: `key-number-${i}-padding-padding` }));
    expect((await failure(s3.send(new DeleteObjectsCommand({ Bucket: 'bkt', Delete: { Objects: many } })))).name).toBe('EntityTooLarge');
  });

  test('a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId', async () => {
    const wrong = client({ credentials: { accessKeyId: KEY_ID, secretAccessKey: 'not the secret' } });
    expect(await failure(wrong.send(new GetObjectCommand({ Bucket: 'bkt', Key: 'k' })))).toMatchObject({
      name: 'SignatureDoesNotMatch',
      status: 403,
    });
    const unknown = client({ credentials: { accessKeyId: 'NOBODY', secretAccessKey: SECRET } });
    expect(await failure(unknown.send(new GetObjectCommand({ Bucket: 'bkt', Key: 'k' })))).toMatchObject({
      name: 'InvalidAccessKeyId',
      status: 403,
    });
  });

  test('a clock 20 minutes off is RequestTimeTooSkewed; the SDK corrects its clock from the answer, and its next request passes', async () => {
    const skewed = client({ systemClockOffset: -20 * 60 * 1000 });
    expect(await failure(skewed.send(new GetObjectCommand({ Bucket: 'bkt', Key: 'k' })))).toMatchObject({
      name: 'RequestTimeTooSkewed',
      status: 403,
    });
    expect(last().error!.fields).toMatchObject({ MaxAllowedSkewMilliseconds: '900000' });
    expect(Math.abs(skewed.config.systemClockOffset)).toBeLessThan(60_000);
    await skewed.send(new GetObjectCommand({ Bucket: 'bkt', Key: 'k' }));
  });

  test('no credentials, SigV2, both mechanisms, a session token', async () => {
    expect(await errorOf(await fetch(`${endpoint}/bkt/k`))).toMatchObject({ status: 403, code: 'AccessDenied' });
    const v2 = await errorOf(await fetch(`${endpoint}/bkt/k`, { headers: { authorization: `AWS ${KEY_ID}:c2lnbmF0dXJl` } }));
    expect(v2).toMatchObject({ status: 400, code: 'InvalidRequest', message: expect.stringContaining('AWS4-HMAC-SHA256') });
    const v2query = await errorOf(await fetch(`${endpoint}/bkt/k?AWSAccessKeyId=${KEY_ID}&Signature=x&Expires=1`));
    expect(v2query).toMatchObject({ status: 400, code: 'InvalidRequest' });
    const signed = signV4({
      method: 'GET',
      path: '/bkt/k',
      headers: { host: endpoint.slice(7), 'x-amz-security-token': 't' },
      payloadHash: sha256hex(''),
    });
    expect(codeOf((await send('GET', '/bkt/k', signed.headers)).text)).toBe('InvalidToken');
    const both = signV4({
      method: 'GET',
      path: '/bkt/k',
      query: 'X-Amz-Algorithm=AWS4-HMAC-SHA256',
      headers: { host: endpoint.slice(7) },
      payloadHash: sha256hex(''),
    });
    expect(codeOf((await send('GET', '/bkt/k?X-Amz-Algorithm=AWS4-HMAC-SHA256', both.headers)).text)).toBe('InvalidArgument');
  });

  test('a path sent with characters unencoded (or lowercase hex) but signed in canonical form is accepted', async () => {
    const signed = signV4({
      method: 'GET',
      path: '/bkt/it%27s%20%21%2A',
      headers: { host: endpoint.slice(7) },
      payloadHash: sha256hex(''),
    });
    const res = await send('GET', "/bkt/it's%20!*", signed.headers);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).path).toBe("/bkt/it's%20!*");
    expect((await send('GET', '/bkt/it%27s%20%21%2a', signed.headers)).status).toBe(200);
    expect(codeOf((await send('GET', '/bkt/its%20!*', signed.headers)).text)).toBe('SignatureDoesNotMatch');
  });

  test('an x-amz-* header that was not signed is refused', async () => {
    const signed = signV4({ method: 'GET', path: '/bkt/k', headers: { host: endpoint.slice(7) }, payloadHash: sha256hex('') });
    const res = await send('GET', '/bkt/k', { ...signed.headers, 'x-amz-meta-extra': 'sneaked in' });
    expect(parseXml(res.text)).toMatchObject({ Error: { Code: 'AccessDenied', HeadersNotSigned: 'x-amz-meta-extra' } });
    // The same request as signed passes: the test's signer and the kit agree.
    expect((await send('GET', '/bkt/k', signed.headers)).status).toBe(200);
  });
});

describe('presigned URLs', () => {
  test('GET and PUT (the JS SDK signs an empty body CRC32 into a PUT URL: ignored, as S3 ignores it)', async () => {
    const key = 'pre signed/ü+&=';
    const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'bkt', Key: key }), { expiresIn: 60 });
    const got = await fetch(getUrl);
    expect(got.status).toBe(200);
    expect(await got.json()).toMatchObject({ presigned: true, region: 'us-east-1' });
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'bkt', Key: key, ContentType: 'text/plain' }), { expiresIn: 60 });
    expect(putUrl).toContain('x-amz-checksum-crc32=AAAAAA%3D%3D');
    const put = await fetch(putUrl, { method: 'PUT', body: 'presigned body', headers: { 'content-type': 'text/plain' } });
    expect(put.status).toBe(200);
    expect(put.headers.get('etag')).toBe(`"${md5hex('presigned body')}"`);
    expect(last().auth).toMatchObject({
      presigned: true,
      payloadHash: 'UNSIGNED-PAYLOAD',
      hoisted: { 'x-amz-checksum-crc32': 'AAAAAA==' },
    });
    // A header the URL did not sign is refused.
    const extra = await fetch(putUrl, { method: 'PUT', body: 'x', headers: { 'x-amz-meta-evil': '1' } });
    expect(await errorOf(extra)).toMatchObject({ status: 403, code: 'AccessDenied' });
  });

  test('forged: another signature, another key, another query, expiry past 7 days', async () => {
    const url = new URL(await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'bkt', Key: 'k' }), { expiresIn: 60 }));
    const forged = new URL(url);
    const sig = forged.searchParams.get('X-Amz-Signature')!;
    forged.searchParams.set('X-Amz-Signature', sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0'));
    expect(await errorOf(await fetch(forged))).toMatchObject({ status: 403, code: 'SignatureDoesNotMatch' });
    expect(await errorOf(await fetch(url.href.replace('/bkt/k?', '/bkt/other?')))).toMatchObject({ code: 'SignatureDoesNotMatch' });
    expect(await errorOf(await fetch(`${url.href}&prefix=x`))).toMatchObject({ code: 'SignatureDoesNotMatch' });
    const long = new URL(url);
    long.searchParams.set('X-Amz-Expires', '604801');
    expect(await errorOf(await fetch(long))).toMatchObject({ status: 400, code: 'AuthorizationQueryParametersError' });
  });

  test('a URL valid for 1 s, used after 2 s: AccessDenied "Request has expired"', async () => {
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'bkt', Key: 'k' }), { expiresIn: 1 });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const error = await errorOf(await fetch(url));
    expect(error).toMatchObject({ status: 403, code: 'AccessDenied', message: 'Request has expired', doc: { 'X-Amz-Expires': '1' } });
  });
});

describe('bodies from the AWS SDK', () => {
  const data = crypto.randomBytes(200_000);
  const streamOf = (buffer: Buffer) => Readable.from([buffer.subarray(0, 70_000), buffer.subarray(70_000)]);

  test.each([
    ['a Buffer: a signed payload and an x-amz-checksum-crc32 header', () => s3, () => data],
    ['a stream: aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer', () => s3, () => streamOf(data)],
    ['WHEN_REQUIRED: no checksum', () => client({ requestChecksumCalculation: 'WHEN_REQUIRED' }), () => data],
  ])('%s', async (_what, makeClient, body) => {
    const put = await makeClient().send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: body(), ContentLength: data.length }));
    expect(put.ETag).toBe(`"${md5hex(data)}"`);
    const { result, consumer } = last();
    expect(result).toMatchObject({ bytes: data.length });
    expect(consumer).toMatchObject({ ended: true, errored: null, bytes: data.length, md5: md5hex(data) });
    if (result!.checksums.crc32) expect(result!.checksums.crc32).toBe(crc32b64(data));
  });

  test.each(['CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'] as const)('ChecksumAlgorithm %s, as a header and as a trailer', async (algorithm) => {
    for (const body of [data, streamOf(data)]) {
      const put = await s3.send(
        new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: body, ContentLength: data.length, ChecksumAlgorithm: algorithm }),
      );
      const name = algorithm.toLowerCase() as 'crc32c' | 'crc64nvme' | 'sha1' | 'sha256';
      if (name === 'sha1' || name === 'sha256') expect(last().result!.checksums[name]).toBe(b64(name, data));
      expect(put[`Checksum${algorithm}`]).toBe(last().result!.checksums[name]);
    }
  });

  test('the algorithms S3 added in 2026 (XXHASH64 here) are NotImplemented', async () => {
    const xxhash = client({ requestChecksumCalculation: 'WHEN_REQUIRED' });
    xxhash.middlewareStack.add(
      (next) => async (args: any) => {
        args.request.headers['x-amz-checksum-xxhash64'] = Buffer.alloc(8).toString('base64');
        return next(args);
      },
      { step: 'build' },
    );
    expect(await failure(xxhash.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: data })))).toMatchObject({
      name: 'NotImplemented',
      status: 501,
    });
  });

  test('a wrong CRC32 header, a wrong Content-MD5, a malformed Content-MD5; the consumer never sees an end', async () => {
    const wrongCrc = await failure(
      s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: data, ChecksumCRC32: crc32b64(Buffer.from('other')) })),
    );
    expect(wrongCrc).toMatchObject({ name: 'BadDigest', message: 'The CRC32 you specified did not match the calculated checksum.' });
    expect(last().consumer).toMatchObject({ ended: false, errored: 'BadDigest', bytes: data.length });
    const wrongMd5 = await failure(
      s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: data, ContentMD5: b64('md5', 'other') })),
    );
    expect(wrongMd5).toMatchObject({ name: 'BadDigest', message: 'The Content-MD5 you specified did not match what we received.' });
    expect(last().consumer).toMatchObject({ ended: false, errored: 'BadDigest' });
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: data, ContentMD5: 'abc' })))).toMatchObject({
      name: 'InvalidDigest',
    });
  });

  /** A client whose aws-chunked body is changed on the wire, after the SDK computed the trailer. */
  function corrupting(change: (chunk: Buffer) => Buffer | null): S3Client {
    const corrupt = client();
    corrupt.middlewareStack.add(
      (next) => async (args: any) => {
        let done = false;
        const tamper = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            const changed = done ? null : change(Buffer.from(chunk));
            if (changed) done = true;
            callback(null, changed ?? chunk);
          },
        });
        args.request.body = args.request.body.pipe(tamper);
        return next(args);
      },
      { step: 'deserialize', priority: 'high' },
    );
    return corrupt;
  }

  test('an aws-chunked body changed in flight (a data byte, or the CRC32 trailer) is BadDigest and never ends', async () => {
    const flipByte = corrupting((chunk) => (chunk.length > 1000 ? ((chunk[500]! ^= 1), chunk) : null));
    const flipped = await failure(
      flipByte.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: streamOf(data), ContentLength: data.length })),
    );
    expect(flipped).toMatchObject({ name: 'BadDigest', message: 'The CRC32 you specified did not match the calculated checksum.' });
    expect(last().consumer).toMatchObject({ ended: false, errored: 'BadDigest', bytes: data.length });
    const trailer = corrupting((chunk) =>
      chunk.includes('x-amz-checksum-crc32:') ? Buffer.from(chunk.toString().replace(/:[^\r]+/, ':AAAAAA==')) : null,
    );
    expect(
      (await failure(trailer.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'obj', Body: streamOf(data), ContentLength: data.length }))))
        .name,
    ).toBe('BadDigest');
    expect(last().consumer).toMatchObject({ ended: false, errored: 'BadDigest' });
  });

  test('past maxBytes: EntityTooLarge, from the declared length or while streaming', async () => {
    expect((await failure(s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'small/x', Body: data })))).name).toBe('EntityTooLarge');
    const undeclared = chunked(data, 65536).body;
    const res = await send(
      'PUT',
      '/bkt/small/y',
      signV4({
        method: 'PUT',
        path: '/bkt/small/y',
        headers: { host: endpoint.slice(7) },
        payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
      }).headers,
      undeclared,
    );
    expect(codeOf(res.text)).toBe('EntityTooLarge');
    expect(last().consumer).toMatchObject({ ended: false, errored: 'EntityTooLarge' });
  });
});

describe('bodies built here: signed chunks, trailers, framing', () => {
  const host = () => endpoint.slice('http://'.length);

  test("AWS's published example: seed and chunk signatures as documented, verified by the kit", async () => {
    const data = Buffer.alloc(66560, 'a');
    const signed = signV4({
      method: 'PUT',
      path: '/examplebucket/chunkObject.txt',
      headers: {
        host: 's3.amazonaws.com',
        'content-encoding': 'aws-chunked',
        'content-length': '66824',
        'x-amz-decoded-content-length': '66560',
        'x-amz-storage-class': 'REDUCED_REDUNDANCY',
      },
      payloadHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
      date: '20130524T000000Z',
      id: EXAMPLE_ID,
      secret: EXAMPLE_SECRET,
    });
    expect(signed.seed).toBe('4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9');
    const { body, signatures } = chunked(data, 65536, signed);
    expect(signatures).toEqual([
      'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648',
      '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497',
      'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9',
    ]);
    expect(body.length).toBe(66824);
    clock = () => Date.UTC(2013, 4, 24, 0, 5);
    const res = await send('PUT', '/examplebucket/chunkObject.txt', signed.headers, body);
    expect(res.status).toBe(200);
    expect(last().result).toMatchObject({ bytes: 66560, checksums: {} });
    expect(last().consumer).toMatchObject({ ended: true, md5: md5hex(data) });
  });

  function signedPut(path: string, data: Buffer, mode: string, extra: Record<string, string> = {}): Signed {
    const headers = { host: host(), 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(data.length), ...extra };
    return signV4({ method: 'PUT', path, headers, payloadHash: mode });
  }

  test('signed chunks, and signed chunks with a signed CRC32C trailer', async () => {
    const data = crypto.randomBytes(300_000);
    const plain = signedPut('/bkt/signed', data, 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD');
    expect((await send('PUT', '/bkt/signed', plain.headers, chunked(data, 65536, plain).body)).status).toBe(200);
    expect(last().consumer).toMatchObject({ ended: true, md5: md5hex(data) });

    const { Crc32c } = await import('@aws-crypto/crc32c');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(new Crc32c().update(data).digest() >>> 0);
    const trailing = signedPut('/bkt/signed', data, 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', {
      'x-amz-trailer': 'x-amz-checksum-crc32c',
    });
    const body = chunked(data, 65536, trailing, ['x-amz-checksum-crc32c', crc.toString('base64')]).body;
    expect((await send('PUT', '/bkt/signed', trailing.headers, body)).status).toBe(200);
    expect(last().result!.checksums).toEqual({ crc32c: crc.toString('base64') });

    // The trailer's signature covers the trailer: another checksum value is refused.
    const forged = Buffer.from(body.toString('latin1').replace(/crc32c:[^\r]+/, 'crc32c:AAAAAA=='), 'latin1');
    expect(codeOf((await send('PUT', '/bkt/signed', trailing.headers, forged)).text)).toBe('SignatureDoesNotMatch');
  });

  test.each([
    ['a changed byte in the second chunk', 'SignatureDoesNotMatch', (body: Buffer) => ((body[65536 + 200]! ^= 1), body)],
    [
      'chunks swapped for a replay of the first',
      'SignatureDoesNotMatch',
      (body: Buffer) => Buffer.concat([body.subarray(0, 65536 + 90), body.subarray(0, 65536 + 90), body.subarray(2 * (65536 + 90))]),
    ],
    ['no final chunk', 'IncompleteBody', (body: Buffer) => body.subarray(0, 2 * (65536 + 90))],
    ['garbage after the final chunk', 'InvalidRequest', (body: Buffer) => Buffer.concat([body, Buffer.from('junk')])],
  ])('%s: %s, and the consumer never sees an end', async (_what, code, change) => {
    const data = crypto.randomBytes(150_000);
    const signed = signedPut('/bkt/tampered', data, 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD');
    const res = await send('PUT', '/bkt/tampered', signed.headers, change(chunked(data, 65536, signed).body));
    expect(codeOf(res.text)).toBe(code);
    expect(last().consumer).toMatchObject({ ended: false, errored: code });
  });

  test('a header beyond ASCII is verified as the text the client signed, sent in UTF-8 or in one byte a character', async () => {
    const emptyHash = sha256hex('');
    // Go's SDKs and botocore send the UTF-8 bytes of the text they signed (Node reads each byte as a character).
    const utf8 = signV4({
      method: 'GET',
      path: '/bkt/u',
      headers: { host: host(), 'x-amz-meta-title': 'café ☕' },
      payloadHash: emptyHash,
    });
    const wire = { ...utf8.headers, 'x-amz-meta-title': Buffer.from('café ☕', 'utf8').toString('latin1') };
    expect((await send('GET', '/bkt/u', wire)).status).toBe(200);
    // Node's own http client sends a character below 256 as one byte, and signs the character.
    const latin1 = signV4({ method: 'GET', path: '/bkt/u', headers: { host: host(), 'x-amz-meta-title': 'café' }, payloadHash: emptyHash });
    expect((await send('GET', '/bkt/u', latin1.headers)).status).toBe(200);
    // Another text than the one signed is still refused.
    const forged = { ...utf8.headers, 'x-amz-meta-title': Buffer.from('cafe ☕', 'utf8').toString('latin1') };
    expect(codeOf((await send('GET', '/bkt/u', forged)).text)).toBe('SignatureDoesNotMatch');
  });

  test('a plain signed payload whose body is not the one signed: XAmzContentSHA256Mismatch', async () => {
    const signed = signV4({
      method: 'PUT',
      path: '/bkt/p',
      headers: { host: host(), 'content-length': '5' },
      payloadHash: sha256hex('hello'),
    });
    const res = await send('PUT', '/bkt/p', signed.headers, Buffer.from('jello'));
    expect(parseXml(res.text)).toMatchObject({ Error: { Code: 'XAmzContentSHA256Mismatch', S3ComputedContentSHA256: sha256hex('jello') } });
    expect(last().consumer).toMatchObject({ ended: false, errored: 'XAmzContentSHA256Mismatch' });
  });

  test('x-amz-decoded-content-length that is not the body: IncompleteBody', async () => {
    const data = crypto.randomBytes(1000);
    const headers = (length: number) =>
      signV4({
        method: 'PUT',
        path: '/bkt/len',
        headers: { host: host(), 'x-amz-decoded-content-length': String(length), 'x-amz-trailer': 'x-amz-checksum-crc32' },
        payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
      }).headers;
    const body = chunked(data, 300, undefined, ['x-amz-checksum-crc32', crc32b64(data)]).body;
    expect((await send('PUT', '/bkt/len', headers(1000), body)).status).toBe(200);
    expect(codeOf((await send('PUT', '/bkt/len', headers(1001), body)).text)).toBe('IncompleteBody');
    expect(codeOf((await send('PUT', '/bkt/len', headers(999), body)).text)).toBe('IncompleteBody');
    expect(last().consumer!.ended).toBe(false);
  });

  /** A request that is only a stream with headers: the framing parser fed in pieces of any size. */
  async function fedInPieces(signed: Signed, path: string, body: Buffer, piece: () => number) {
    const req = Object.assign(new PassThrough(), {
      method: 'PUT',
      url: path,
      headers: signed.headers,
      headersDistinct: Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k, [v]])),
      complete: false,
    }) as unknown as IncomingMessage & PassThrough;
    const auth = await authenticate(req, new URL(`http://s3${path}`), async (id) => SECRETS[id] ?? null);
    const { stream, result } = decodeBody(req, auth, { maxBytes: 1 << 30 });
    let ended = false;
    stream.on('end', () => (ended = true));
    const out: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => out.push(chunk));
    for (let i = 0; i < body.length;) {
      const n = Math.min(piece(), body.length - i);
      req.write(body.subarray(i, i + n));
      i += n;
      if (i % 7 === 0) await new Promise(setImmediate);
    }
    Object.assign(req, { complete: true });
    req.end();
    const settled = await result.then(
      (value) => ({ value }),
      (error: S3Error) => ({ error }),
    );
    await new Promise(setImmediate);
    return { ...settled, ended, data: Buffer.concat(out) };
  }

  test('the framing parser is indifferent to how the bytes are split (1 byte to 100 KiB)', async () => {
    const data = crypto.randomBytes(100_000);
    const signed = signedPut('/bkt/pieces', data, 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', {
      'x-amz-trailer': 'x-amz-checksum-crc32',
    });
    const body = chunked(data, 8000, signed, ['x-amz-checksum-crc32', crc32b64(data)]).body;
    for (const piece of [() => 1, () => 1 + crypto.randomInt(200), () => 100_000]) {
      const got = await fedInPieces(signed, '/bkt/pieces', body, piece);
      expect(got).toMatchObject({ value: { bytes: data.length, checksums: { crc32: crc32b64(data) } }, ended: true });
      expect(got.data.equals(data)).toBe(true);
    }
    const tampered = Buffer.from(body);
    tampered[body.length - 300]! ^= 1;
    const bad = await fedInPieces(signed, '/bkt/pieces', tampered, () => 1 + crypto.randomInt(50));
    expect(bad).toMatchObject({ error: expect.objectContaining({ code: 'SignatureDoesNotMatch' }), ended: false });
  });
});

describe('throughput and memory', () => {
  /** `total` bytes of aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER, made as read, with its CRC32 trailer. */
  function bigBody(total: number, chunk = 64 * 1024): Readable {
    const block = crypto.randomBytes(chunk);
    const header = Buffer.from(`${chunk.toString(16)}\r\n`);
    const crlf = Buffer.from('\r\n');
    let sent = 0;
    let crc = 0;
    return new Readable({
      highWaterMark: 1 << 20,
      read() {
        if (sent === total) {
          const value = Buffer.alloc(4);
          value.writeUInt32BE(crc >>> 0);
          this.push(`0\r\nx-amz-checksum-crc32:${value.toString('base64')}\r\n\r\n`);
          this.push(null);
          sent = -1;
          return;
        }
        if (sent < 0) return;
        crc = zlib.crc32(block, crc);
        sent += chunk;
        this.push(Buffer.concat([header, block, crlf]));
      },
    });
  }

  test('1 GiB of aws-chunked body streams through with flat memory', async () => {
    const total = 1024 ** 3;
    const signed = signV4({
      method: 'PUT',
      path: '/bkt/big/one',
      headers: {
        host: endpoint.slice(7),
        'x-amz-decoded-content-length': String(total),
        'x-amz-trailer': 'x-amz-checksum-crc32',
        'content-encoding': 'aws-chunked',
      },
      payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    });
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    const started = process.hrtime.bigint();
    const res = await send('PUT', '/bkt/big/one', signed.headers, bigBody(total));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    clearInterval(sampler);
    expect(res.status).toBe(200);
    expect(last().result!.bytes).toBe(total);
    const growth = (peak - before) / 2 ** 20;
    console.log(
      `1 GiB aws-chunked + CRC32 + MD5 over loopback: ${seconds.toFixed(1)} s, ${(1024 / seconds).toFixed(0)} MiB/s, RSS growth ${growth.toFixed(0)} MiB`,
    );
    expect(growth).toBeLessThan(150);
  }, 180_000);

  test('256 MiB through the AWS SDK (a stream body: aws-chunked with its CRC32 trailer)', async () => {
    const total = 256 * 1024 ** 2;
    const block = crypto.randomBytes(1 << 20);
    const body = Readable.from(
      (function* () {
        for (let i = 0; i < 256; i++) yield block;
      })(),
    );
    const started = process.hrtime.bigint();
    const put = await s3.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'big/sdk', Body: body, ContentLength: total }));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    expect(put.ChecksumCRC32).toBe(last().result!.checksums.crc32);
    expect(last().result!.bytes).toBe(total);
    console.log(`256 MiB PutObject through the SDK: ${seconds.toFixed(1)} s, ${(256 / seconds).toFixed(0)} MiB/s`);
  }, 180_000);
});
