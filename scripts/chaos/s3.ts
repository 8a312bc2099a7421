// The chaos load's S3 part: multipart uploads through the AWS SDK, as a client that retries
// does (each call again until it is answered, for up to a minute), and their check afterwards:
// a completion that was acknowledged is an object with exactly its bytes; an upload given up on
// is aborted, and then either no object or (when a completion went through unanswered) the
// right one. What MFS keeps of parts is the audit's to compare.
import crypto from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';

export type Answer = 'ok' | '503' | '503 without Retry-After' | '4xx' | '500' | 'no answer' | 'hang';
type Note = (op: string, at: number, answer: Answer, status: number, ms: number) => void;

const PART_BYTES = 5 * 1024 * 1024; // S3's least part but the last
const CALL_TIMEOUT_MS = 30_000;
// A completion assembles and records the object through the worker, and a worker killed under
// it is noticed within its steps' heartbeat timeout: the AWS CLI waits 60 s for an answer.
const COMPLETE_TIMEOUT_MS = 60_000;
const GIVE_UP_MS = 60_000;

export interface MultipartObject {
  key: string;
  sha256: string;
  at: number;
  /** The completion was acknowledged. */
  completed: boolean;
}

const sha256 = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

export function createS3Load(endpoint: string, credentials: { accessKeyId: string; secretAccessKey: string }, note: Note) {
  const s3 = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 });
  const bucket = `chaos-${crypto.randomBytes(4).toString('hex')}`;
  const objects: MultipartObject[] = [];

  /** One call, again until answered with success (or a 4xx, or GIVE_UP_MS): undefined if not. */
  async function persist<T>(
    op: string,
    send: (options: { abortSignal: AbortSignal }) => Promise<T>,
    timeoutMs = CALL_TIMEOUT_MS,
  ): Promise<T | undefined> {
    const until = Date.now() + GIVE_UP_MS;
    for (;;) {
      const at = Date.now();
      const abortSignal = AbortSignal.timeout(timeoutMs);
      try {
        const out = await send({ abortSignal });
        note(op, at, 'ok', 200, Date.now() - at);
        return out;
      } catch (err) {
        const e = err as { name: string; $metadata?: { httpStatusCode?: number }; $response?: { headers?: Record<string, string> } };
        const status = e.$metadata?.httpStatusCode ?? 0;
        // Only the abort is a hang: the SDK names a reset connection TimeoutError as well.
        const answer: Answer = abortSignal.aborted
          ? 'hang'
          : status === 0
            ? 'no answer'
            : status === 503
              ? e.$response?.headers?.['retry-after']
                ? '503'
                : '503 without Retry-After'
              : status >= 500
                ? '500'
                : '4xx';
        note(op, at, answer, status, Date.now() - at);
        if (answer === '4xx' || Date.now() > until) return undefined;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  return {
    objects,
    async setup(): Promise<void> {
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    },

    /** One multipart upload of two parts (5 MiB and a little), retried as a client would. */
    async multipart(): Promise<void> {
      const key = `chaos/${crypto.randomUUID()}`;
      const parts = [crypto.randomBytes(PART_BYTES), crypto.randomBytes(1000)];
      const at = Date.now();
      const created = await persist('s3 create', (signal) =>
        s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }), signal),
      );
      const UploadId = created?.UploadId;
      if (!UploadId) return;
      const etags: string[] = [];
      for (const [i, body] of parts.entries()) {
        const part = await persist('s3 part', (signal) =>
          s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: body }), signal),
        );
        if (!part?.ETag) break;
        etags.push(part.ETag);
      }
      const object: MultipartObject = { key, sha256: sha256(Buffer.concat(parts)), at, completed: false };
      objects.push(object);
      if (etags.length === parts.length) {
        const done = await persist(
          's3 complete',
          (signal) =>
            s3.send(
              new CompleteMultipartUploadCommand({
                Bucket: bucket,
                Key: key,
                UploadId,
                MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
              }),
              signal,
            ),
          COMPLETE_TIMEOUT_MS,
        );
        object.completed = done !== undefined;
      }
      if (!object.completed)
        await persist('s3 abort', (signal) => s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }), signal));
    },

    /** What is wrong with the objects now (an empty list: nothing). */
    async problems(): Promise<string[]> {
      const found: string[] = [];
      for (const o of objects) {
        let digest: string | null = null;
        try {
          const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: o.key }));
          digest = sha256(await got.Body!.transformToByteArray());
        } catch (err) {
          if ((err as { name: string }).name !== 'NoSuchKey') throw err;
        }
        if (o.completed && digest !== o.sha256) found.push(`completed object ${o.key} ${digest ? 'has other bytes' : 'is missing'}`);
        if (!o.completed && digest !== null && digest !== o.sha256) found.push(`given-up object ${o.key} has other bytes`);
      }
      return found;
    },
  };
}
