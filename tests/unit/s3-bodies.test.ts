// The S3 protocol kit's bodies (api/s3/body.ts) against real clients: what the AWS SDK for
// JavaScript v3 sends (checksums as headers and trailers, aws-chunked streams, WHEN_REQUIRED),
// and signed chunks, trailers and framing built here from the SigV4 specification, checked
// first against AWS's published example; 1 GiB with flat memory. Against the kit's test server
// (tests/support/s3-kit.ts); no stack needed.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { PassThrough, Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { authenticate } from '../../api/s3/auth.js';
import { decodeBody } from '../../api/s3/body.js';
import { S3Error } from '../../api/s3/errors.js';
import { parseXml } from '../../api/s3/xml.js';
import {
  b64,
  chunked,
  client,
  codeOf,
  crc32b64,
  endpoint,
  EXAMPLE_ID,
  EXAMPLE_SECRET,
  failure,
  last,
  md5hex,
  s3,
  send,
  SECRETS,
  setClock,
  sha256hex,
  type Signed,
  signV4,
  useKitServer,
} from '../support/s3-kit.js';

useKitServer();

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
    setClock(() => Date.UTC(2013, 4, 24, 0, 5));
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
