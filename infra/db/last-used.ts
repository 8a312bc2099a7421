// `lastUsedAt` of credentials (API keys, gateway tokens), gathered in memory and written in one
// bulk every LAST_USED_FLUSH_MS: a request costs no database write for it. Readers of this
// process see the pending values (`withPending`).
import type { Model } from 'mongoose';
import { LAST_USED_FLUSH_MS } from '../constants.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function createUseRecorder(model: Model<any>) {
  const pending = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;

  async function flushNow(): Promise<void> {
    if (pending.size === 0) return;
    const batch = [...pending];
    pending.clear();
    await model.bulkWrite(
      batch.map(([id, at]) => ({ updateOne: { filter: { _id: id }, update: { $max: { lastUsedAt: at } } } })),
      { ordered: false },
    );
  }

  return {
    record(id: string, at: number): void {
      pending.set(id, at);
      if (!timer) {
        timer = setTimeout(() => {
          timer = undefined;
          flushNow().catch(() => undefined);
        }, LAST_USED_FLUSH_MS);
        timer.unref();
      }
    },

    /** The record with this process's pending use, if later than the stored one. */
    withPending<T extends { _id: string; lastUsedAt?: number | null }>(row: T): T {
      const at = pending.get(row._id);
      return at && at > (row.lastUsedAt ?? 0) ? { ...row, lastUsedAt: at } : row;
    },

    forget(id: string): void {
      pending.delete(id);
    },

    /** Writes pending values now (graceful shutdown, tests). */
    async flush(): Promise<void> {
      if (timer) clearTimeout(timer);
      timer = undefined;
      await flushNow();
    },
  };
}
