// Contract of the pin workflow (workflows/pins.ts): one execution per pin request,
// `pin:<cid>:<userId>`, taking it from queued to pinned or failed.
import type { JobContract } from './job.js';

export interface PinInput {
  /** The record's `_id` (`<userId>:<multihash>`). */
  key: string;
  requestId: string;
  userId: string;
  cid: string;
  multihash: string;
  origins: string[];
  /** Epoch ms after which the pin ends `failed` with TIMEOUT. */
  deadline: number;
}

export type PinResult = 'pinned' | 'failed' | 'gone';
export type PinWorkflow = (input: PinInput) => Promise<PinResult>;

export const pinJob: JobContract<PinInput, { cid: string; userId: string }> = {
  workflowType: 'pinWorkflow',
  taskQueue: (base) => base,
  workflowId: ({ cid, userId }) => `pin:${cid}:${userId}`,
  searchAttributes: ({ cid, userId }) => ({ Cid: cid, UserId: userId }),
};

/**
 * The long wait for content to be fetched: a heartbeating activity on its own task queue,
 * whose worker runs thousands at once (they are mostly asleep and must not take the slots of
 * short activities). A wait that stops heartbeating for `heartbeatTimeoutMs` (its worker died)
 * is retried on another worker.
 */
export const pinWait = {
  activity: 'awaitClusterPin',
  taskQueue: (base: string) => `${base}-waits`,
  heartbeatTimeoutMs: 10_000,
  concurrency: 2000,
} as const;
