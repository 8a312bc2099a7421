// The scale bench's load (scale.ts): its records inserted straight through the stores'
// mongoose models, in batches, files and pins interleaved so both grow together.
import type { Database } from '../../infra/db/index.js';
import type { FileRecord } from '../../infra/db/files.js';
import type { PinRecord } from '../../infra/db/pins.js';
import { say } from './harness.js';
import { assertCidShape, fileRecord, pinRecord, type Kind, type ScaleData } from './records.js';

export const BATCH = 2000;
export const LOAD_CONCURRENCY = 2;

/**
 * Inserts records 0..N-1 of each kind with insertMany (unordered) in batches, two at a time,
 * files and pins interleaved so both grow together. Past `loadMs` no new batch starts, so
 * each kind's loaded records are still 0..k-1. Returns how many of each were loaded.
 */
export async function load(db: Database, d: ScaleData, loadMs: number, signal: AbortSignal): Promise<Record<Kind, number>> {
  const batches: { kind: Kind; from: number; to: number; order: number }[] = [];
  for (const kind of ['files', 'pins'] as const) {
    const n = Math.ceil(d.counts[kind] / BATCH);
    for (let b = 0; b < n; b++)
      batches.push({ kind, from: b * BATCH, to: Math.min(d.counts[kind], (b + 1) * BATCH), order: (b + 0.5) / n });
  }
  batches.sort((a, b) => a.order - b.order);
  const total = d.counts.files + d.counts.pins;
  const loaded: Record<Kind, number> = { files: 0, pins: 0 };
  const start = Date.now();
  let next = 0;
  let lastReport = start;
  let stopped = false;
  const insert = async () => {
    while (next < batches.length) {
      signal.throwIfAborted();
      if (Date.now() - start > loadMs) {
        stopped = true;
        return;
      }
      const batch = batches[next++]!;
      const indices = Array.from({ length: batch.to - batch.from }, (_, k) => batch.from + k);
      if (batch.kind === 'files') {
        const docs: FileRecord[] = indices.map((i) => fileRecord(d, i));
        assertCidShape(docs[0]!);
        await db.files.model.insertMany(docs, { ordered: false });
      } else {
        const docs: PinRecord[] = indices.map((i) => pinRecord(d, i));
        assertCidShape(docs[0]!);
        await db.pins.model.insertMany(docs, { ordered: false });
      }
      loaded[batch.kind] += indices.length;
      const now = Date.now();
      if (now - lastReport >= 30_000) {
        lastReport = now;
        const done = loaded.files + loaded.pins;
        const rate = done / ((now - start) / 1000);
        say(
          `  loaded ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} (${Math.round(rate).toLocaleString('en-US')}/s, ` +
            `about ${Math.round((total - done) / rate / 60)} min left)`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: LOAD_CONCURRENCY }, insert));
  if (stopped) say(`  the load reached --load-minutes (${loadMs / 60_000}) and stopped with what it had`);
  return loaded;
}
