// Real S3 clients against the S3 interface at its public address, through the edge as `npm start`
// serves it (edge/): the aws CLI, s3cmd and rclone (each: make a
// bucket, put, list, get, delete), presigned GET and PUT from @aws-sdk/s3-request-presigner,
// and a browser on another origin uploading through a presigned URL where the bucket's CORS
// rules allow it (headless Chromium enforces CORS; nothing here can pretend it did).
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, GetObjectCommand, PutBucketCorsCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Browser } from 'playwright-core';
import type { ApiServer } from '../api/server.js';
import { cacheDir } from '../stack/binaries.js';
import { launchBrowser, serveOrigin } from './support/browser.js';
import { collect, kubo } from './support/content.js';
import { bucketName, s3Client, s3Failure } from './support/s3.js';
import { startEdgedApi, type EdgedApi } from './support/edge.js';
import { createUser, tempDir, type TestUser } from './support/stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

const exec = promisify(execFile);
const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;
let s3: S3Client;
let dir: string;

let edged: EdgedApi;
/** The public S3 address: through the edge, as `npm start` serves it. */
let endpoint: string;

beforeAll(async () => {
  [edged, worker] = await Promise.all([startEdgedApi(env), startWorkerProcess(env)]);
  api = edged.api;
  endpoint = `http://127.0.0.1:${edged.ports.s3}`;
  user = await createUser(api, 'bodhi');
  s3 = s3Client(api, user, { endpoint });
  dir = tempDir('stupa-s3-clients-');
});
afterAll(async () => {
  s3?.destroy();
  await Promise.all([edged?.close(), worker?.kill()]);
});

/** The clients' environment: a custom CA bundle (some machines set AWS_CA_BUNDLE) breaks rclone's plain-HTTP transport. */
const { AWS_CA_BUNDLE: _caBundle, ...clientEnv } = process.env;
const md5 = (file: string) => crypto.createHash('md5').update(fs.readFileSync(file)).digest('hex');
const objectCid = async (bucket: string, key: string) => (await api.deps.db.objects.get(bucket, key))?.cid;

/** A file of `size` random bytes in the test's directory. */
function randomFile(name: string, size: number): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, crypto.randomBytes(size));
  return file;
}

/** The bytes the object's CID names in Kubo equal the file's. */
async function sameBytesInKubo(bucket: string, key: string, file: string) {
  const cid = await objectCid(bucket, key);
  expect(cid).toBeDefined();
  expect((await collect(kubo().cat(cid!))).equals(fs.readFileSync(file))).toBe(true);
}

test('the aws CLI: mb, cp (a 20 MiB file goes multipart), ls, cp back, cp within S3 (multipart copy), rm, rb', async () => {
  const aws = path.join(cacheDir(), 'awscli-1.46.3', 'bin', 'aws');
  expect(fs.existsSync(aws)).toBe(true); // npm test installs it (scripts/bootstrap.mjs)
  const run = (...args: string[]) =>
    exec(aws, ['--endpoint-url', endpoint, ...args], {
      env: {
        ...clientEnv,
        AWS_ACCESS_KEY_ID: user.keyPrefix,
        AWS_SECRET_ACCESS_KEY: user.apiKey,
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_CONFIG_FILE: '/dev/null',
        HOME: dir,
      },
    });
  const bucket = bucketName('awscli');
  const small = randomFile('aws-small.bin', 1000);
  const big = randomFile('aws-big.bin', 20 * 1024 * 1024);
  await run('s3', 'mb', `s3://${bucket}`);
  await run('s3', 'cp', small, `s3://${bucket}/dir/small.bin`);
  await run('s3', 'cp', big, `s3://${bucket}/dir/big.bin`);
  const listed = (await run('s3', 'ls', `s3://${bucket}/dir/`)).stdout;
  expect(listed).toMatch(/\s1000 small\.bin/);
  expect(listed).toMatch(/\s20971520 big\.bin/);
  expect((await api.deps.db.objects.get(bucket, 'dir/big.bin'))!.parts).toBeGreaterThan(1);
  await sameBytesInKubo(bucket, 'dir/big.bin', big);
  const back = path.join(dir, 'aws-back.bin');
  await run('s3', 'cp', `s3://${bucket}/dir/big.bin`, back);
  expect(md5(back)).toBe(md5(big));
  // A copy within S3 of more than 8 MiB is a multipart copy (UploadPartCopy): the same bytes, the same CID.
  await run('s3', 'cp', `s3://${bucket}/dir/big.bin`, `s3://${bucket}/dir/copy.bin`);
  expect((await api.deps.db.objects.get(bucket, 'dir/copy.bin'))!.parts).toBeGreaterThan(1);
  expect(await objectCid(bucket, 'dir/copy.bin')).toBe(await objectCid(bucket, 'dir/big.bin'));
  // With a checksum: a SHA256 multipart upload is S3's composite of its 8 MiB parts' SHA-256s.
  await run('s3', 'cp', '--checksum-algorithm', 'SHA256', big, `s3://${bucket}/dir/summed.bin`);
  const head = JSON.parse(
    (await run('s3api', 'head-object', '--bucket', bucket, '--key', 'dir/summed.bin', '--checksum-mode', 'ENABLED')).stdout,
  );
  const bytes = fs.readFileSync(big);
  const sha256 = (data: Buffer) => crypto.createHash('sha256').update(data).digest();
  const partDigests = [0, 1, 2].map((i) => sha256(bytes.subarray(i * 8 * 1024 * 1024, (i + 1) * 8 * 1024 * 1024)));
  expect(head).toMatchObject({ ChecksumSHA256: `${sha256(Buffer.concat(partDigests)).toString('base64')}-3`, ChecksumType: 'COMPOSITE' });
  await run('s3', 'rm', '--recursive', `s3://${bucket}/dir/`);
  await run('s3', 'rb', `s3://${bucket}`);
  expect(await api.deps.db.buckets.get(bucket)).toBeNull();
}, 180_000);

test('s3cmd: mb, put, ls, get, del, rb', async () => {
  const port = new URL(endpoint).port;
  const config = path.join(dir, 's3cmd.cfg');
  fs.writeFileSync(
    config,
    [
      '[default]',
      `access_key = ${user.keyPrefix}`,
      `secret_key = ${user.apiKey}`,
      `host_base = 127.0.0.1:${port}`,
      `host_bucket = 127.0.0.1:${port}`,
      'use_https = False',
      'signature_v2 = False',
      'bucket_location = us-east-1',
      '',
    ].join('\n'),
  );
  const run = (...args: string[]) => exec('s3cmd', ['-c', config, ...args], { env: { ...clientEnv, HOME: dir } });
  const bucket = bucketName('s3cmd');
  const file = randomFile('s3cmd.bin', 70_000);
  await run('mb', `s3://${bucket}`);
  await run('put', file, `s3://${bucket}/a b/s3cmd.bin`);
  expect((await run('ls', '-r', `s3://${bucket}`)).stdout).toContain(`s3://${bucket}/a b/s3cmd.bin`);
  await sameBytesInKubo(bucket, 'a b/s3cmd.bin', file);
  const back = path.join(dir, 's3cmd-back.bin');
  await run('get', `s3://${bucket}/a b/s3cmd.bin`, back);
  expect(md5(back)).toBe(md5(file));
  await run('del', `s3://${bucket}/a b/s3cmd.bin`);
  await run('rb', `s3://${bucket}`);
  expect(await api.deps.db.buckets.get(bucket)).toBeNull();
}, 120_000);

test('rclone: mkdir, copy, ls, check (MD5s), copy back, delete, rmdir', async () => {
  const remote = {
    RCLONE_CONFIG_STUPA_TYPE: 's3',
    RCLONE_CONFIG_STUPA_PROVIDER: 'Other',
    RCLONE_CONFIG_STUPA_ACCESS_KEY_ID: user.keyPrefix,
    RCLONE_CONFIG_STUPA_SECRET_ACCESS_KEY: user.apiKey,
    RCLONE_CONFIG_STUPA_ENDPOINT: endpoint,
    RCLONE_CONFIG_STUPA_REGION: 'us-east-1',
  };
  const run = (...args: string[]) => exec('rclone', ['--config', '/dev/null', ...args], { env: { ...clientEnv, ...remote, HOME: dir } });
  const bucket = bucketName('rclone');
  const source = path.join(dir, 'rclone-src');
  fs.mkdirSync(path.join(source, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(source, 'one.txt'), 'one');
  fs.writeFileSync(path.join(source, 'sub', 'two.bin'), crypto.randomBytes(200_000));
  await run('mkdir', `stupa:${bucket}`);
  await run('copy', source, `stupa:${bucket}/tree`);
  const listed = (await run('ls', `stupa:${bucket}`)).stdout;
  expect(listed).toMatch(/\s3 tree\/one\.txt/);
  expect(listed).toMatch(/\s200000 tree\/sub\/two\.bin/);
  await run('check', source, `stupa:${bucket}/tree`); // compares MD5s with the ETags
  const back = path.join(dir, 'rclone-back');
  await run('copy', `stupa:${bucket}/tree`, back);
  expect(md5(path.join(back, 'sub', 'two.bin'))).toBe(md5(path.join(source, 'sub', 'two.bin')));
  await run('delete', `stupa:${bucket}`);
  await run('rmdir', `stupa:${bucket}`);
  expect(await api.deps.db.buckets.get(bucket)).toBeNull();
}, 120_000);

test('presigned GET and PUT; an expired one is AccessDenied', async () => {
  const bucket = bucketName('presign');
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  // x-amz-acl: private, signed into the URL, is accepted (and changes nothing).
  const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'signed.txt', ACL: 'private' }), { expiresIn: 60 });
  expect(putUrl).toContain('x-amz-acl=private');
  const put = await fetch(putUrl, { method: 'PUT', body: 'sent with a presigned URL' });
  expect(put.status).toBe(200);
  const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'signed.txt' }), { expiresIn: 60 });
  const got = await fetch(getUrl);
  expect(await got.text()).toBe('sent with a presigned URL');
  expect(got.headers.get('x-amz-meta-cid')).toBe(await objectCid(bucket, 'signed.txt'));
  const shortUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'signed.txt' }), { expiresIn: 1 });
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const expired = await fetch(shortUrl);
  expect(expired.status).toBe(403);
  expect(await expired.text()).toContain('<Code>AccessDenied</Code>');
  // A negative lifetime: expired when it was made.
  const before = await fetch(await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'signed.txt' }), { expiresIn: -1000 }));
  expect([before.status, (await before.text()).includes('<Code>AccessDenied</Code>')]).toEqual([403, true]);
  expect(await s3Failure(s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'nothing' })))).toMatchObject({ code: 'NoSuchKey' });
});

test('a page on another origin PUTs through a presigned URL where the bucket’s CORS allows it', async () => {
  const bucket = bucketName('browser');
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const origin = await serveOrigin('<!doctype html><title>s3 uploader</title>');
  let browser: Browser | undefined;
  try {
    browser = await launchBrowser();
    const page = await browser.newPage();
    await page.goto(origin.url);
    const upload = async (key: string) => {
      const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: key, ContentType: 'text/plain' }), { expiresIn: 60 });
      return page.evaluate(async (u) => {
        try {
          const res = await fetch(u, { method: 'PUT', body: 'from a browser', headers: { 'Content-Type': 'text/plain' } });
          return { status: res.status, etag: res.headers.get('ETag'), cid: res.headers.get('x-amz-meta-cid') };
        } catch (err) {
          return { status: 0, etag: String(err), cid: null };
        }
      }, url);
    };
    // No CORS rules: the browser refuses (status 0) and nothing is stored... the PUT itself
    // needs a preflight (Content-Type text/plain is simple, but PUT is not a simple method).
    expect((await upload('refused.txt')).status).toBe(0);
    expect(await objectCid(bucket, 'refused.txt')).toBeUndefined();
    const allowed = new URL(origin.url).origin;
    await s3.send(
      new PutBucketCorsCommand({
        Bucket: bucket,
        CORSConfiguration: {
          CORSRules: [
            { AllowedOrigins: [allowed], AllowedMethods: ['PUT', 'GET'], AllowedHeaders: ['*'], ExposeHeaders: ['ETag', 'x-amz-meta-cid'] },
          ],
        },
      }),
    );
    const done = await upload('allowed.txt');
    expect(done.status).toBe(200);
    expect(done.etag).toBe(`"${crypto.createHash('md5').update('from a browser').digest('hex')}"`);
    expect(done.cid).toBe(await objectCid(bucket, 'allowed.txt'));
  } finally {
    await browser?.close();
    await origin.close();
  }
}, 60_000);
