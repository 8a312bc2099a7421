// A bucket's snapshot: its folder's snapshot lists the bucket's objects, keys split on `/`
// into directories, with S3's flat-key clashes resolved as infra/db/folder-tree.ts documents;
// the CID equals `ipfs add -r` of the same tree on disk. The folder cannot be deleted from
// under its bucket.
import fs from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { ApiServer } from '../api/server.js';
import { addTree } from './support/content.js';
import { bucketName, s3Client } from './support/s3.js';
import { call, createUser, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;
let s3: S3Client;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  user = await createUser(api);
  s3 = s3Client(api, user);
});
afterAll(async () => {
  s3?.destroy();
  await Promise.all([api?.close(), worker?.kill()]);
});

test('the snapshot of a bucket’s folder is its objects as a tree, clashes resolved, equal to ipfs add -r', async () => {
  const bucket = bucketName('snap');
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const objects: Record<string, string> = {
    'top.txt': 'top',
    'a/b': 'file where a directory is needed',
    'a/b/c': 'deeper',
    'a/b.txt': 'beside',
    'dir//y': 'empty segment',
    'marker/': '',
    'data/': 'a key ending in / with bytes',
  };
  for (const [key, body] of Object.entries(objects)) await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  // The same tree on disk, by the documented rules.
  const root = path.join(tempDir('stupa-bucket-tree-'), bucket);
  const onDisk: Record<string, string> = {
    'top.txt': 'top',
    'a/b (2)': 'file where a directory is needed',
    'a/b/c': 'deeper',
    'a/b.txt': 'beside',
    'dir/_/y': 'empty segment',
    'data/_': 'a key ending in / with bytes',
  };
  for (const [file, body] of Object.entries(onDisk)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), body);
  }
  fs.mkdirSync(path.join(root, 'marker'));
  const expected = await addTree(root);

  const folderId = (await api.deps.db.buckets.get(bucket))!.folderId;
  const started = await call(api, 'POST', `/folders/${folderId}/snapshot`, { key: user.apiKey });
  expect([200, 202]).toContain(started.status);
  const done = await eventually(
    () => call(api, 'GET', `/folders/${folderId}/snapshot`, { key: user.apiKey }),
    (r) => r.body.status === 'complete',
    120_000,
    'snapshot complete',
  );
  expect(done.body.snapshot.cid).toBe(expected);
  expect(done.body.snapshot.fileCount).toBe(6);

  const refused = await call(api, 'DELETE', `/folders/${folderId}?recursive=true`, { key: user.apiKey });
  expect(refused.status).toBe(409);
  expect(refused.body.error.reason).toBe('FOLDER_BACKS_BUCKET');
}, 180_000);
