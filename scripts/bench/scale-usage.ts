// Storage counting at scale (`npm run bench -- --scale`, on the loaded database): the audit's
// comparison of the big user's counters with their records (`usage.compare`) and a recount
// (`usage.recount`), each timed with how far the bench process's memory grew meanwhile, beside
// a read of that user's records as one array, which is what a tally did before it read a page
// of contents at a time (infra/db/usage-tally.ts): the memory figures are of one run.
import type { Database } from '../../infra/db/index.js';
import { USAGE_RECOUNT_QUIET_MS } from '../../infra/constants.js';

interface Measured<T> {
  value: T;
  seconds: number;
  /** The most the process's resident memory rose above where it started, in MB. */
  growthMb: number;
}

/** Runs `fn` once, sampling the resident memory every 50 ms. */
async function measured<T>(fn: () => Promise<T>): Promise<Measured<T>> {
  const base = process.memoryUsage().rss;
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  const t = performance.now();
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { value, seconds: (performance.now() - t) / 1000, growthMb: Math.round((peak - base) / 2 ** 20) };
  } finally {
    clearInterval(sampler);
  }
}

/** Lines for the summary; throws when a count is wrong (the recount must agree with the records). */
export async function usageAtScale(db: Database, userId: string, records: number): Promise<string[]> {
  // Before: the user's whole set of records as one array (what a tally held).
  const whole = await measured(() => wholeRead(db, userId));
  global.gc?.();
  const compared = await measured(() => db.usage.compare(userId));
  if (!compared.value) throw new Error('the big user is not counted over distinct content');
  if (compared.value.fromRecords.used === 0) throw new Error('the records count nothing');
  const recount = await measured(() => db.usage.recount(userId));
  const again = await measured(() => db.usage.compare(userId));
  if (!again.value || JSON.stringify(again.value.stored) !== JSON.stringify(again.value.fromRecords) || again.value.holdingsOff !== 0)
    throw new Error(`after the recount the counters still differ: ${JSON.stringify(again.value)}`);
  const n = (v: number) => v.toLocaleString('en-US');
  const line = (label: string, text: string) => `bench --scale: ${label.padEnd(34)} ${text}`;
  const quiet = USAGE_RECOUNT_QUIET_MS / 1000;
  return [
    line(
      'usage: one array of the records',
      `${n(whole.value)} records of the big user in ${whole.seconds.toFixed(1)} s, memory +${whole.growthMb} MB (how a tally read before)`,
    ),
    line(
      'usage: audit compare, paged',
      `${compared.seconds.toFixed(1)} s, memory +${compared.growthMb} MB (${n(records)} records; the counters differed, as loaded directly)`,
    ),
    line(
      'usage: recount, paged',
      `${recount.seconds.toFixed(1)} s (of which ${quiet} s or more waiting for writes in flight), memory +${recount.growthMb} MB; ` +
        `used ${n(recount.value.used)} bytes`,
    ),
    line('usage: audit compare after', `${again.seconds.toFixed(1)} s, memory +${again.growthMb} MB; counters equal the records`),
  ];
}

/** The user's holding records read at once, the way a tally read them before it was paged. */
async function wholeRead(db: Database, userId: string): Promise<number> {
  type Row = { multihash: string; size: number | null };
  const fields = { _id: 0, multihash: 1, size: 1 };
  const [files, pins] = await Promise.all([
    db.files.model.find({ userId }, fields).lean<Row[]>().exec(),
    db.pins.model.find({ userId, status: 'pinned' }, fields).lean<Row[]>().exec(),
  ]);
  return files.length + pins.length;
}
