// S3 clients of the tests: the AWS SDK for JavaScript v3 with its defaults (checksums on:
// aws-chunked bodies with a CRC32 trailer), pointed at a test API's S3 port, with an API key
// as credentials (access key id = keyPrefix, secret = the full key).
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { ApiServer } from '../../api/server.js';
import type { TestUser } from './stack.js';

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
