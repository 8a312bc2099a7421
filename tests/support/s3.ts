// S3 clients of the tests: the AWS SDK for JavaScript v3 with its defaults (checksums on:
// aws-chunked bodies with a CRC32 trailer), pointed at a test API's S3 port, with an API key
// as credentials (access key id = keyPrefix, secret = the full key).
import { CreateBucketCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { ApiServer } from '../../api/server.js';
import { createUser, startTestApi, type TestUser } from './stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './worker.js';

export function s3Client(api: ApiServer, user: TestUser, overrides: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    endpoint: api.s3Url,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: user.keyPrefix, secretAccessKey: user.apiKey },
    maxAttempts: 1,
    ...overrides,
  });
}

/** The error an SDK call failed with: its S3 code and HTTP status. */
export async function s3Failure(call: Promise<unknown>): Promise<{ code: string; status: number | undefined; message: string }> {
  try {
    await call;
  } catch (err) {
    const e = err as { name: string; Code?: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { code: e.Code ?? e.name, status: e.$metadata?.httpStatusCode, message: e.message };
  }
  throw new Error('the call succeeded');
}

/** A bucket name no other test uses. */
export const bucketName = (label: string) => `${label}-${Math.random().toString(36).slice(2, 10)}`;

/** What an S3 test file works with: its API and worker (on the tests' task queue, whose
 * environment is `env`), a user of `plan`, that user's client and a bucket of its own. */
export interface S3Suite {
  env: Record<string, string>;
  api: ApiServer;
  worker: WorkerProcess;
  user: TestUser;
  s3: S3Client;
  bucket: string;
}

/** Starts an S3Suite before the file's tests and stops it after them; its fields are set once they start. */
export function s3Suite(label: string, plan = 'bodhi'): S3Suite {
  const suite: Partial<S3Suite> & Pick<S3Suite, 'env'> = { env: { TEMPORAL_TASK_QUEUE: testTaskQueue() } };
  beforeAll(async () => {
    [suite.api, suite.worker] = await Promise.all([startTestApi(suite.env), startWorkerProcess(suite.env)]);
    suite.user = await createUser(suite.api, plan);
    suite.s3 = s3Client(suite.api, suite.user);
    suite.bucket = bucketName(label);
    await suite.s3.send(new CreateBucketCommand({ Bucket: suite.bucket }));
  }, 60_000);
  afterAll(async () => {
    suite.s3?.destroy();
    await Promise.all([suite.api?.close(), suite.worker?.kill()]);
  });
  return suite as S3Suite; // set before the first test runs
}
