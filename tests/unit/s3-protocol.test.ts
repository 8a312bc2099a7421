// The S3 protocol kit (api/s3: auth.ts, xml.ts, errors.ts) against real clients: S3 XML and
// errors, SigV4 as the AWS SDK for JavaScript v3 signs (path and virtual-host style, clock skew,
// unsigned headers) and presigned URLs, against the kit's test server (tests/support/s3-kit.ts).
// No stack needed. The bodies (body.ts) are tests/unit/s3-bodies.test.ts.
import http from 'node:http';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { asS3Error, S3Error } from '../../api/s3/errors.js';
import { errorXml, parseXml, toXml } from '../../api/s3/xml.js';
import {
  client,
  codeOf,
  endpoint,
  errorOf,
  failure,
  KEY_ID,
  last,
  md5hex,
  s3,
  SECRET,
  send,
  sha256hex,
  signV4,
  useKitServer,
} from '../support/s3-kit.js';

useKitServer();

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
