// Contract of the snapshot workflow (workflows/snapshots.ts): one execution per folder and
// listing, `snapshot:<folderId>:<digest>`, so asking again while it runs finds the same job.
import type { JobContract } from './job.js';

export interface SnapshotInput {
  userId: string;
  folderId: string;
  /** The digest of the folder's listing when the snapshot was asked for (core/snapshots.ts). */
  digest: string;
}

export interface SnapshotProgress {
  /** Files linked into the directory so far, of `total`. */
  linked: number;
  total: number;
}

export type SnapshotResult =
  | { status: 'complete'; cid: string; fileCount: number; totalSize: number; takenAt: number }
  /** The folder changed after the snapshot was asked for: ask again. */
  | { status: 'changed' };

export type SnapshotWorkflow = (input: SnapshotInput) => Promise<SnapshotResult>;

export const PROGRESS_QUERY = 'progress';
/** Sent by the linking activity as it goes, so the query answers without waiting for it. */
export const LINKED_SIGNAL = 'linked';

export const snapshotJob: JobContract<SnapshotInput, { folderId: string; digest: string }> = {
  workflowType: 'snapshotWorkflow',
  taskQueue: (base) => base,
  workflowId: ({ folderId, digest }) => `snapshot:${folderId}:${digest}`,
  searchAttributes: ({ userId, folderId }) => ({ UserId: userId, FolderId: folderId }),
};
