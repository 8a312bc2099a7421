// Analytics: GET /analytics over a full year for a user with a million recorded events.
// The events go through the store's `record` (infra/db/analytics.ts), as the use-cases record
// them, spread over the last 365 days: BATCH at a time, so that events of one day recorded in
// the same turn share one update, as they do under load; the rate one at a time (CONCURRENCY
// in flight, each its own update) is measured too. Other users' day documents (FILLER_USERS ×
// a year, inserted directly) make the collection larger than the one user's year. Then
// GET /analytics for the 366 days up to today, REQUESTS times one after the other: it reads
// the year's day documents through one index range, whatever the number of events. The answer
// is checked: its uploads must be the uploads recorded.
import pLimit from 'p-limit';
import { utcDay, type AnalyticsChange } from '../../infra/db/analytics.js';
import { openDatabase } from '../../infra/db/index.js';
import { createBenchUser } from './children.js';
import type { BenchContext } from './harness.js';

export const ANALYTICS_EVENTS = 1_000_000;
const BATCH = 10_000;
const SINGLE_EVENTS = 5_000;
const CONCURRENCY = 16;
const FILLER_USERS = 200;
const REQUESTS = 50;
const DAY_MS = 24 * 60 * 60 * 1000;
const TYPES = ['image/png', 'image/jpeg', 'text/plain', 'application/json', 'video/mp4', 'application/vnd.api+json'];

export interface AnalyticsResult {
  events: number;
  recordSeconds: number;
  eventsPerSecond: number;
  singleEventsPerSecond: number;
  documents: number;
  p50: number;
  p99: number;
  correct: boolean;
}

/** Event `i`: mostly uploads of several types, some deletes, pins, publishes and gateway bytes. */
function event(i: number): AnalyticsChange {
  switch (i % 10) {
    case 0:
      return { deletes: 1, storedBytes: -1000 };
    case 1:
      return { gatewayBytes: 50_000 };
    case 2:
      return { pins: 1 };
    case 3:
      return { publishes: 1 };
    default:
      return { uploads: 1, uploadBytes: 1000 + (i % 7), mimeType: TYPES[i % TYPES.length], storedBytes: 1000 };
  }
}
const isUpload = (i: number) => i % 10 >= 4;

const percentile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

export async function benchAnalytics(ctx: BenchContext, say: (line: string) => void): Promise<AnalyticsResult> {
  const user = await createBenchUser(ctx.env);
  const db = await openDatabase(ctx.endpoints.mongodbUri);
  try {
    const now = Date.now();
    // Days 0..364 before now: all inside the 366 days up to today.
    const at = (i: number) => now - ((i * 7919) % 365) * DAY_MS;

    const filler = Array.from({ length: FILLER_USERS }, (_, u) => `usr_filler${String(u).padStart(6, '0')}`);
    for (const userId of filler) {
      await db.analytics.days.insertMany(
        Array.from({ length: 366 }, (_, d) => {
          const day = utcDay(now - d * DAY_MS);
          return { _id: `${userId}:${day}`, userId, day, uploads: 5, uploadBytes: 5000, types: { 'image/png': 5 }, storedBytes: 5000 };
        }),
        { ordered: false },
      );
    }
    say(`analytics: ${(FILLER_USERS * 366).toLocaleString('en')} day documents of ${FILLER_USERS} other users inserted`);

    // One at a time (CONCURRENCY in flight): each event its own update, nearly always.
    const limit = pLimit(CONCURRENCY);
    let t = performance.now();
    await Promise.all(Array.from({ length: SINGLE_EVENTS }, (_, i) => limit(() => db.analytics.record(user.userId, at(i), event(i)))));
    const singleEventsPerSecond = SINGLE_EVENTS / ((performance.now() - t) / 1000);
    say(`analytics: ${SINGLE_EVENTS.toLocaleString('en')} events one at a time: ${Math.round(singleEventsPerSecond)}/s`);

    let uploads = 0;
    for (let i = 0; i < SINGLE_EVENTS; i++) if (isUpload(i)) uploads++;
    t = performance.now();
    for (let start = SINGLE_EVENTS; start < ANALYTICS_EVENTS; start += BATCH) {
      const end = Math.min(ANALYTICS_EVENTS, start + BATCH);
      const batch: Promise<void>[] = [];
      for (let i = start; i < end; i++) {
        if (isUpload(i)) uploads++;
        batch.push(db.analytics.record(user.userId, at(i), event(i)));
      }
      await Promise.all(batch);
      if (ctx.signal.aborted) throw new Error('aborted');
    }
    const recordSeconds = (performance.now() - t) / 1000;
    const batched = ANALYTICS_EVENTS - SINGLE_EVENTS;
    say(`analytics: ${batched.toLocaleString('en')} events in batches of ${BATCH.toLocaleString('en')}: ${recordSeconds.toFixed(1)} s`);
    const documents = await db.analytics.days.countDocuments({});

    const today = utcDay(now);
    const url = `${ctx.apiUrl}/analytics?from=${utcDay(now - 365 * DAY_MS)}&to=${today}`;
    const get = async () => {
      const res = await fetch(url, { headers: { 'X-Api-Key': user.apiKey }, signal: ctx.signal });
      const body = (await res.json()) as { totals?: { uploads: number }; daily?: unknown[] };
      if (res.status !== 200) throw new Error(`GET /analytics: ${res.status} ${JSON.stringify(body)}`);
      return body;
    };
    const first = await get(); // warm-up, and the check
    const correct = first.totals?.uploads === uploads && first.daily?.length === 366;
    const samples: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const s = performance.now();
      await get();
      samples.push(performance.now() - s);
    }
    samples.sort((a, b) => a - b);
    return {
      events: ANALYTICS_EVENTS,
      recordSeconds,
      eventsPerSecond: batched / recordSeconds,
      singleEventsPerSecond,
      documents,
      p50: percentile(samples, 0.5),
      p99: percentile(samples, 0.99),
      correct,
    };
  } finally {
    await db.close();
  }
}

export function analyticsLine(r: AnalyticsResult): string {
  return (
    `bench: analytics      GET /analytics, 366 days of a user with ${r.events.toLocaleString('en')} events: ` +
    `p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms over ${REQUESTS}  ` +
    `recorded ${Math.round(r.eventsPerSecond).toLocaleString('en')} events/s in batches of ${BATCH.toLocaleString('en')}, ` +
    `${Math.round(r.singleEventsPerSecond).toLocaleString('en')}/s one at a time (${CONCURRENCY} in flight)  ` +
    `[${r.documents.toLocaleString('en')} day documents in all; answer ${r.correct ? 'correct' : 'WRONG'}]`
  );
}
