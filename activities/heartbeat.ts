// Activities whose worker may die under them beat while they work: Temporal learns within the
// step's heartbeat timeout that nobody runs it any more and retries it on a live worker, rather
// than after its start-to-close timeout (minutes to hours). Measured by npm run chaos: a worker
// killed during a multipart completion's commit left its CompleteMultipartUpload waiting for
// the 10-minute timeout.
import { Context } from '@temporalio/activity';

export const HEARTBEAT_EVERY_MS = 2_000;

/** Runs `work`, heartbeating every HEARTBEAT_EVERY_MS until it ends. */
export async function heartbeating<T>(work: (ctx: Context) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    return await work(ctx);
  } finally {
    clearInterval(beat);
  }
}
