// The S3 protocol kit's test server and the requests built here: a tiny node:http server that
// authenticates with api/s3/auth.ts, decodes with api/s3/body.ts and answers what it verified
// (S3 XML, or the S3 error), and SigV4 signing and aws-chunked framing written here from the
// specification, independent of the kit. Used by tests/unit/s3-protocol.test.ts and
// tests/unit/s3-bodies.test.ts; each test file gets its own server (useKitServer).
import crypto from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { authenticate, type Authenticated } from '../../api/s3/auth.js';
import { decodeBody, readSmallBody, type BodyResult } from '../../api/s3/body.js';
import { asS3Error, S3Error } from '../../api/s3/errors.js';
import { errorXml, parseXml, toXml } from '../../api/s3/xml.js';

export const KEY_ID = 'STUPATESTKEY';
export const SECRET = 'test/secret+key=42';
// AWS's example credentials, of its published SigV4 streaming example.
export const EXAMPLE_ID = 'AKIAIOSFODNN7EXAMPLE';
export const EXAMPLE_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
export const SECRETS: Record<string, string> = { [KEY_ID]: SECRET, [EXAMPLE_ID]: EXAMPLE_SECRET };

interface Seen {
  host?: string;
  auth?: Authenticated;
  result?: BodyResult;
  error?: S3Error;
  parts?: unknown[];
  consumer?: { ended: boolean; errored: string | null; bytes: number; md5: string };
}
const seen: Seen[] = [];
export const last = () => seen[seen.length - 1]!;
let clock: () => number = Date.now;
export let endpoint: string;
let server: http.Server;
export let s3: S3Client;

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

/** The test file's server on an ephemeral port, and `s3` a client of it; the clock set back after each test. */
export function useKitServer(): void {
  beforeAll(async () => {
    server = http.createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    s3 = client();
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));
  afterEach(() => (clock = Date.now));
}

/** The server's clock (ms) until the test ends. */
export function setClock(now: () => number): void {
  clock = now;
}

export function client(config: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: KEY_ID, secretAccessKey: SECRET },
    ...config,
  });
}

export async function failure(promise: Promise<unknown>): Promise<{ name: string; message: string; status?: number }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
  throw new Error('expected the request to fail');
}

/** An S3 error answer, parsed. */
export async function errorOf(res: Response): Promise<{ status: number; code: string; message: string; doc: any }> {
  const doc = parseXml(await res.text()) as any;
  return { status: res.status, code: doc.Error.Code, message: doc.Error.Message, doc: doc.Error };
}

export const md5hex = (data: crypto.BinaryLike) => crypto.createHash('md5').update(data).digest('hex');
export const b64 = (name: 'sha1' | 'sha256' | 'md5', data: crypto.BinaryLike) => crypto.createHash(name).update(data).digest('base64');
export const crc32b64 = (data: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data) >>> 0);
  return out.toString('base64');
};
export const sha256hex = (data: crypto.BinaryLike) => crypto.createHash('sha256').update(data).digest('hex');
export const hmac = (key: crypto.BinaryLike, data: string) => crypto.createHmac('sha256', key).update(data).digest();
export const amzDate = (ms = Date.now()) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');

// ---- SigV4 written here from the specification, independent of api/s3/auth.ts ----

export interface Signed {
  headers: Record<string, string>;
  seed: string;
  key: Buffer;
  scope: string;
  date: string;
}

export function signV4(opts: {
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
export function chunked(
  data: Buffer,
  chunkSize: number,
  signed?: Signed,
  trailer?: [string, string],
): { body: Buffer; signatures: string[] } {
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
export function send(
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
export const codeOf = (text: string) => (parseXml(text) as any).Error?.Code as string | undefined;
