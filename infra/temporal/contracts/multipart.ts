// Contract of the S3 multipart completion (workflows/multipart.ts): one execution per upload,
// `mpu:<uploadId>`, so a client's retried CompleteMultipartUpload finds the same job; and of
// the scheduled cleanup of abandoned uploads.
import type { JobContract } from './job.js';

export interface MultipartInput {
  uploadId: string;
  userId: string;
}

/** What CompleteMultipartUpload answers (also kept on the upload for a retry). */
export interface MultipartResult {
  cid: string;
  etag: string;
  size: number;
  /** Base64, by algorithm (crc32, crc32c, sha1, sha256), as S3 answers them. */
  checksums: { crc32?: string; crc32c?: string; sha1?: string; sha256?: string };
}

export type MultipartWorkflow = (input: MultipartInput) => Promise<MultipartResult>;
export type MultipartCleanupWorkflow = () => Promise<number>;

export const multipartJob: JobContract<MultipartInput, { uploadId: string }> = {
  workflowType: 'multipartWorkflow',
  taskQueue: (base) => base,
  workflowId: ({ uploadId }) => `mpu:${uploadId}`,
  searchAttributes: ({ userId }) => ({ UserId: userId }),
};

export const multipartCleanupJob: JobContract<void, void> & { scheduleId(base: string): string } = {
  workflowType: 'multipartCleanupWorkflow',
  taskQueue: (base) => base,
  workflowId: () => 'mpu-cleanup',
  searchAttributes: () => ({}),
  // One schedule per task queue, as the sweep's (contracts/sweep.ts).
  scheduleId: (base) => `stupa-mpu-cleanup:${base}`,
};
