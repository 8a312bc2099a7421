// Usage analytics: events are counted per user and UTC day as they happen (infra/db/analytics.ts)
// by the use-cases that cause them, and GET /analytics reads at most a year of those day
// documents through one index range, plus the user's storage counter (infra/db/usage.ts).
import { ACTIVITY_MAX_DAYS, ANALYTICS_DEFAULT_DAYS } from '../infra/constants.js';
import { decodeType, utcDay, type AnalyticsDay } from '../infra/db/analytics.js';
import { MB } from './content.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { InvalidInput } from './errors.js';
import { publishesKey } from './ipns.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** The last millisecond whose UTC day still has a four-digit year. */
const LAST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** Bytes as MB (2^20), to six decimals, as the API shows sizes. */
export const toMB = (bytes: number): number => Math.round((bytes / MB) * 1e6) / 1e6;

export interface Period {
  /** The first day's start and the day after the last one's start (ms), as answered. */
  from: number;
  to: number;
  /** The days, oldest first. */
  days: string[];
}

/**
 * One bound of the period: milliseconds since the epoch (digits), or a UTC day `YYYY-MM-DD`.
 * Returns the start (ms) of the day it names. `to` in milliseconds is exclusive, as every `to`
 * of this API is: its day is the one of the millisecond before it. A day is the whole day.
 */
function dayStart(name: 'from' | 'to', value: string): number {
  let ms: number;
  if (/^\d{1,16}$/.test(value)) {
    ms = Number(value) - (name === 'to' ? 1 : 0);
    if (ms < 0 || ms > LAST_MS) throw new InvalidInput(`${name} is out of range`, 'INVALID_RANGE');
  } else if (/^\d{4}-\d{2}-\d{2}$/.test(value) && utcDay(Date.parse(`${value}T00:00:00Z`) || 0) === value) {
    ms = Date.parse(`${value}T00:00:00Z`);
  } else {
    throw new InvalidInput(`${name} must be milliseconds since the epoch or a UTC day YYYY-MM-DD`);
  }
  return startOfDay(ms);
}

const startOfDay = (ms: number) => ms - (ms % DAY_MS);
const nextDay = (day: string) => utcDay(Date.parse(`${day}T00:00:00Z`) + DAY_MS);

/**
 * The period of a request: whole UTC days, because the counters are daily. Default the last
 * ANALYTICS_DEFAULT_DAYS days up to today; either bound alone is completed from the other; at
 * most ACTIVITY_MAX_DAYS days, and `from` not after `to` (INVALID_RANGE otherwise).
 */
export function analyticsPeriod(q: { from?: string; to?: string }, now = Date.now()): Period {
  const span = (ANALYTICS_DEFAULT_DAYS - 1) * DAY_MS;
  let last = q.to !== undefined ? dayStart('to', q.to) : undefined;
  const first = q.from !== undefined ? dayStart('from', q.from) : (last ?? startOfDay(now)) - span;
  last ??= q.from !== undefined ? startOfDay(now) : first + span;
  if (first > last) throw new InvalidInput('from must not be after to', 'INVALID_RANGE');
  const count = (last - first) / DAY_MS + 1;
  if (count > ACTIVITY_MAX_DAYS)
    throw new InvalidInput(`a period is at most ${ACTIVITY_MAX_DAYS} days; this one has ${count}`, 'INVALID_RANGE');
  return { from: first, to: last + DAY_MS, days: Array.from({ length: count }, (_, i) => utcDay(first + i * DAY_MS)) };
}

export interface Analytics {
  period: { from: number; to: number };
  totals: { uploads: number; storageMB: number; fileTypes: Record<string, number> };
  daily: { date: string; uploads: number; sizeMB: number; gatewayMB: number }[];
  storageGrowth: { date: string; cumulativeMB: number }[];
  gatewayBandwidthMB: number;
  gatewayBandwidthLimitMB: number;
  ipnsPublishesThisMonth: number;
}

/** The first day of the month after `day`'s, and the last day of `day`'s month. */
function monthBounds(day: string): { lastDay: string; nextMonth: string } {
  const [y, m] = day.split('-').map(Number) as [number, number];
  const next = Date.UTC(y, m, 1);
  return { lastDay: utcDay(next - DAY_MS), nextMonth: utcDay(next).slice(0, 7) };
}

const sumStored = (days: AnalyticsDay[]) => days.reduce((sum, d) => sum + (d.storedBytes ?? 0), 0);

/**
 * The caller's analytics over `period`. `totals.storageMB` is the storage used now (distinct
 * content, as the quota counts it); `storageGrowth` is the storage at the end of each day.
 *
 * Storage growth is derived, not stored: the storage at the end of day d is today's counter
 * minus the net bytes recorded on every later day (day documents up to the end of the
 * period's last month, month documents after that). It approximates history: content held
 * before daily counters existed (or before a user was rebuilt or recounted) shows as held on
 * every earlier day, an event whose counter write failed shifts the days before it, and a
 * negative result (possible only after such a shift) is shown as 0. It reads the counter and the
 * days one after the other, so an event in between can be half seen.
 */
export async function getAnalytics(deps: Pick<UseCaseDeps, 'db'>, caller: Caller, period: Period, now = Date.now()): Promise<Analytics> {
  const { db } = deps;
  const userId = caller.user._id;
  const firstDay = period.days[0]!;
  const lastDay = period.days.at(-1)!;
  const { lastDay: monthEnd, nextMonth } = monthBounds(lastDay);
  const [rows, restOfMonth, laterMonths, used, publishes] = await Promise.all([
    db.analytics.range(userId, firstDay, lastDay),
    lastDay < monthEnd ? db.analytics.range(userId, nextDay(lastDay), monthEnd) : [],
    db.analytics.storedInMonths(userId, nextMonth, utcDay(now).slice(0, 7)),
    db.usage.used(userId),
    db.counters.get(publishesKey(userId, now)),
  ]);
  const byDay = new Map(rows.map((r) => [r.day, r]));

  const fileTypes: Record<string, number> = {};
  let uploads = 0;
  let gatewayBytes = 0;
  for (const r of rows) {
    uploads += r.uploads ?? 0;
    gatewayBytes += r.gatewayBytes ?? 0;
    for (const [field, n] of Object.entries(r.types ?? {})) {
      const type = decodeType(field);
      fileTypes[type] = (fileTypes[type] ?? 0) + n;
    }
  }

  // Newest day first: the storage at the end of a day is the end of the next day's less what
  // that next day stored.
  const storageGrowth: Analytics['storageGrowth'] = [];
  let atEnd = used - sumStored(restOfMonth) - laterMonths;
  for (let i = period.days.length - 1; i >= 0; i--) {
    const date = period.days[i]!;
    storageGrowth.unshift({ date, cumulativeMB: toMB(Math.max(0, atEnd)) });
    atEnd -= byDay.get(date)?.storedBytes ?? 0;
  }

  return {
    period: { from: period.from, to: period.to },
    totals: { uploads, storageMB: toMB(used), fileTypes },
    daily: period.days.map((date) => {
      const r = byDay.get(date);
      return { date, uploads: r?.uploads ?? 0, sizeMB: toMB(r?.uploadBytes ?? 0), gatewayMB: toMB(r?.gatewayBytes ?? 0) };
    }),
    storageGrowth,
    gatewayBandwidthMB: toMB(gatewayBytes),
    gatewayBandwidthLimitMB: caller.plan.gatewayBandwidthMB,
    ipnsPublishesThisMonth: publishes,
  };
}
