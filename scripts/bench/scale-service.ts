// The scale bench's requests to the service (scale.ts): list pages checked for order and
// content, the latency of small uploads and pins, and the sweep's jobs counted rather than run.
import { encodeCursor } from '../../core/pages.js';
import { Client, Connection } from '@temporalio/client';
import { parseCid } from '../../infra/ipfs/cid.js';
import { DEFAULT_TASK_QUEUE, DEFAULT_TEMPORAL_NAMESPACE } from '../../infra/constants.js';
import { userContentKey } from '../../infra/db/by-id.js';
import type { Database } from '../../infra/db/index.js';
import type { Kubo } from '../../infra/ipfs/kubo.js';
import { sweepJob } from '../../infra/temporal/contracts/sweep.js';
import type { Jobs } from '../../infra/temporal/jobs.js';

import { measure, type Bounds, type Figure } from './bounded.js';
export interface ListPage {
  items: { cid: string; createdAt: number; folderId: string | null }[];
  nextCursor: string | null;
}

/** The record's position as GET /upload/list gives it out (core/files.ts). */
export const cursorOf = (r: { createdAt: number; _id: string }) => encodeCursor({ at: r.createdAt, id: r._id });

export async function getJson(url: string, apiKey: string, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(url, { headers: { 'X-Api-Key': apiKey }, signal });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

/** Throws unless the page is `limit` items, newest first, each passing `check`. */
export function checkPage(
  items: { createdAt: number }[],
  limit: number,
  what: string,
  check?: (item: ListPage['items'][number]) => string | undefined,
) {
  if (items.length !== limit) throw new Error(`${what}: ${items.length} items, expected ${limit}`);
  for (let i = 1; i < items.length; i++) {
    if (items[i]!.createdAt > items[i - 1]!.createdAt) throw new Error(`${what}: not newest first`);
  }
  for (const item of items) {
    const wrong = check?.(item as ListPage['items'][number]);
    if (wrong) throw new Error(`${what}: ${wrong}`);
  }
}

export interface Latencies {
  upload: Figure;
  pin: Figure;
  uploaded: string[];
  pinned: string[];
}

/** POST /upload/new of small distinct JSON files, then POST /pin of distinct local content. */
export async function serviceLatency(
  t: { apiUrl: string; apiKey: string; kubo: Kubo; tag: string; bounds: Bounds; idle: () => Promise<void> },
  warmUp: number,
): Promise<Latencies> {
  const uploaded: string[] = [];
  let n = 0;
  const upload = async (signal: AbortSignal) => {
    const res = await fetch(`${t.apiUrl}/upload/new`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Api-Key': t.apiKey },
      body: JSON.stringify({ content: { bench: 'scale', phase: t.tag, n: n++, at: Date.now() }, name: `scale-${t.tag}-${n}.json` }),
      signal,
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST /upload/new answered ${res.status}: ${text.slice(0, 200)}`);
    uploaded.push((JSON.parse(text) as { cid: string }).cid);
  };
  // Content for the pins is added to Kubo (not pinned) before the clock starts.
  const files = Array.from({ length: t.bounds.samples + warmUp }, (_, i) => ({
    content: Buffer.from(`stupa scale bench ${t.tag} ${Date.now()} block ${i}\n`),
  }));
  const local: string[] = [];
  for await (const added of t.kubo.addAll(files, { cidVersion: 1, rawLeaves: true, pin: false })) local.push(added.cid.toString());
  const pinned: string[] = [];
  const pin = async (signal: AbortSignal) => {
    const cid = local.shift()!;
    const res = await fetch(`${t.apiUrl}/pin`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Api-Key': t.apiKey },
      body: JSON.stringify({ cid }),
      signal,
    });
    const text = await res.text();
    if (res.status !== 202) throw new Error(`POST /pin answered ${res.status}: ${text.slice(0, 200)}`);
    pinned.push(cid);
  };
  // The first requests of a fresh process pay for JIT and connection pools: not measured.
  for (let i = 0; i < warmUp; i++) {
    await upload(AbortSignal.timeout(t.bounds.timeoutMs));
    await pin(AbortSignal.timeout(t.bounds.timeoutMs));
  }
  await t.idle();
  const uploadFigure = await measure(`POST /upload/new (${t.tag})`, upload, t.bounds);
  await t.idle();
  const pinFigure = await measure(`POST /pin (${t.tag})`, pin, t.bounds);
  return { upload: uploadFigure, pin: pinFigure, uploaded, pinned };
}

/** Jobs that start nothing: the sweep's signals are counted, not sent (see benchScale). */
export function countingJobs(): Jobs & { signals: number } {
  const jobs = {
    signals: 0,
    start: async () => undefined,
    cancel: async () => undefined,
    signalWithStart: async () => {
      jobs.signals++;
    },
    signal: async () => undefined,
    state: async () => ({ state: 'none' as const }),
    query: async () => Promise.reject(new Error('the bench runs no jobs')),
    running: async function* () {},
  };
  return jobs;
}

/** The sweep schedule of the worker, paused: the bench runs a sweep itself, when it measures.
 * `namespace`: the stack's (BenchContext env.TEMPORAL_NAMESPACE), the dev server's by default. */
export async function pauseSweep(temporalAddress: string, namespace = DEFAULT_TEMPORAL_NAMESPACE): Promise<void> {
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const client = new Client({ connection, namespace });
    await client.schedule.getHandle(sweepJob.scheduleId(DEFAULT_TASK_QUEUE)).pause('npm run bench -- --scale times the sweep itself');
  } finally {
    await connection.close();
  }
}

/** Waits (bounded) until the bench's pin requests are pinned, so they are not loading the worker. */
export async function untilPinned(db: Database, userId: string, cids: string[], timeoutMs: number): Promise<void> {
  const keys = cids.map((cid) => userContentKey(userId, parseCid(cid).multihash));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pins = await Promise.all(keys.map((key) => db.pins.get(key)));
    if (pins.every((p) => p?.status === 'pinned')) return;
    if (Date.now() > deadline) throw new Error(`the bench's pins were not all pinned after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
