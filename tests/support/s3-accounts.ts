// Two accounts on S3 for a test file (tests/s3.test.ts, s3-buckets, s3-conditions): the file's
// API and worker (on a task queue of its own), alice and bob with a client each, started before
// the file's tests (useS3Accounts) and stopped after them; the bindings are set once they start.
import crypto from 'node:crypto';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import type { ApiServer } from '../../api/server.js';
import { bucketName, s3Client } from './s3.js';
import { createUser, startTestApi, type TestUser } from './stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './worker.js';

/** The file's environment: its own task queue. */
export const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
export let api: ApiServer;
export let worker: WorkerProcess;
export let alice: TestUser;
export let bob: TestUser;
export let s3: S3Client;
export let bobS3: S3Client;

export function useS3Accounts(): void {
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
}

export const HELLO_CID = 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e';
export const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');
export const text = async (out: { Body?: { transformToString(): Promise<string> } }) => out.Body!.transformToString();
export const used = (user: TestUser) => api.deps.db.usage.used(user.userId);

export async function newBucket(client: S3Client, label: string): Promise<string> {
  const name = bucketName(label);
  await client.send(new CreateBucketCommand({ Bucket: name }));
  return name;
}
