// Gateway bandwidth per account: the bytes the gateway sends, counted for analytics (the
// account's day in infra/db/analytics.ts) and against the plan's gatewayBandwidthMB per UTC
// month. A read of a few KiB must not cost a database write, so bytes are summed in memory and
// written once per BANDWIDTH_FLUSH_MS; the month's total is read from the day documents (at
// most 31, by index) at most once per BANDWIDTH_MEMORY_MS and kept current with what this
// process sends meanwhile. Other gateway processes' bytes are seen within that time, so the
// limit can be passed by what all processes send in it: it is a quota, not a hard ceiling.
import { BANDWIDTH_FLUSH_MS, BANDWIDTH_MEMORY_MS } from '../infra/constants.js';
import { utcDay } from '../infra/db/analytics.js';
import type { Database } from '../infra/db/index.js';
import type { Plan } from '../infra/plans.js';
import { MB } from './content.js';
import { LimitReached } from './errors.js';

interface MonthTotal {
  month: string;
  bytes: number;
  readAt: number;
}

/** Seconds from `now` to the next UTC month, when the bandwidth counts from zero again. */
export function secondsToNextMonth(now: number): number {
  const d = new Date(now);
  return Math.max(1, Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - now) / 1000));
}

/** Bytes the user's gateway sent this UTC month, as written (what the monthly limit is about). */
export async function gatewayBytesThisMonth(db: Database, userId: string, now = Date.now()): Promise<number> {
  const today = utcDay(now);
  const days = await db.analytics.range(userId, `${today.slice(0, 7)}-01`, today);
  return days.reduce((sum, d) => sum + (d.gatewayBytes ?? 0), 0);
}

export function createBandwidthMeter(db: Database) {
  const unwritten = new Map<string, number>();
  const totals = new Map<string, MonthTotal>();
  let timer: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = [...unwritten];
    unwritten.clear();
    const now = Date.now();
    await Promise.all(batch.map(([userId, bytes]) => db.analytics.record(userId, now, { gatewayBytes: bytes })));
  }

  async function monthTotal(userId: string, now: number): Promise<number> {
    const month = utcDay(now).slice(0, 7);
    const known = totals.get(userId);
    if (known && known.month === month && now - known.readAt < BANDWIDTH_MEMORY_MS) return known.bytes;
    const bytes = (await gatewayBytesThisMonth(db, userId, now)) + (unwritten.get(userId) ?? 0);
    if (totals.size >= 10_000) totals.clear(); // a bound, not an eviction policy
    totals.set(userId, { month, bytes, readAt: now });
    return bytes;
  }

  return {
    /** Counts bytes sent for the user's content. */
    add(userId: string, bytes: number): void {
      if (bytes <= 0) return;
      unwritten.set(userId, (unwritten.get(userId) ?? 0) + bytes);
      const total = totals.get(userId);
      if (total) total.bytes += bytes;
      if (!timer) {
        timer = setTimeout(() => void flush().catch(() => undefined), BANDWIDTH_FLUSH_MS);
        timer.unref();
      }
    },

    /** Bytes sent for the user this UTC month, as this process knows them. */
    usedThisMonth: (userId: string) => monthTotal(userId, Date.now()),

    /** 429-worthy when the month's bytes reached the plan's gatewayBandwidthMB. */
    async assertLeft(userId: string, plan: Plan): Promise<void> {
      const limit = plan.gatewayBandwidthMB * MB;
      if ((await monthTotal(userId, Date.now())) < limit) return;
      throw new LimitReached(
        'GATEWAY_BANDWIDTH_LIMIT',
        `this gateway sent its plan's ${plan.gatewayBandwidthMB} MB this month; it serves again from the 1st (UTC)`,
      );
    },

    /** Writes what is counted now (shutdown, tests). */
    flush,
  };
}

export type BandwidthMeter = ReturnType<typeof createBandwidthMeter>;
