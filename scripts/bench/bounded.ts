// Measuring with bounds, for the scale bench (scale.ts): a figure takes samples until it has
// enough or its time budget is spent, each sample given up after a timeout (counted as such,
// and as "over" the timeout in the percentiles); and waiting (bounded) until the database
// server is idle, so that a timed-out request still running there does not weigh on the next.
import fs from 'node:fs';
import path from 'node:path';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { say } from './harness.js';

class Timeout extends Error {}

export interface Figure {
  /** Milliseconds of each sample that finished. */
  samples: number[];
  /** Samples that did not finish within the timeout (at most one: sampling stops there). */
  timeouts: number;
  /** Why the measurement stopped early with a wrong answer, if it did. */
  error?: string;
  timeoutMs: number;
}

export interface Bounds {
  samples: number;
  budgetMs: number;
  timeoutMs: number;
}

/**
 * Runs `once` up to `samples` times, starting none after `budgetMs`, each given up after
 * `timeoutMs` (its signal aborts then; a store call goes on in the server, which the next
 * measurement's idle wait absorbs). A timeout or an error ends the measurement.
 */
export async function measure(label: string, once: (signal: AbortSignal) => Promise<void>, bounds: Bounds): Promise<Figure> {
  const figure: Figure = { samples: [], timeouts: 0, timeoutMs: bounds.timeoutMs };
  const start = Date.now();
  while (figure.samples.length < bounds.samples && Date.now() - start < bounds.budgetMs) {
    const signal = AbortSignal.timeout(bounds.timeoutMs);
    const timedOut = new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Timeout()), { once: true }));
    const t = performance.now();
    try {
      await Promise.race([once(signal), timedOut]);
      figure.samples.push(performance.now() - t);
    } catch (err) {
      if (err instanceof Timeout || signal.aborted) figure.timeouts++;
      else figure.error = (err as Error).message;
      break;
    } finally {
      timedOut.catch(() => undefined);
    }
  }
  say(`  ${label}: ${describe(figure)}`);
  return figure;
}

/** Nearest-rank percentile; a timed-out sample counts as longer than any finished one. */
export function percentile(f: Figure, q: number): { ms: number; over: boolean } {
  const all = [...f.samples].sort((a, b) => a - b);
  for (let i = 0; i < f.timeouts; i++) all.push(Infinity);
  if (all.length === 0) return { ms: NaN, over: false };
  const v = all[Math.max(0, Math.ceil(q * all.length) - 1)]!;
  return v === Infinity ? { ms: f.timeoutMs, over: true } : { ms: v, over: false };
}

export const ms = (v: { ms: number; over: boolean }) =>
  Number.isNaN(v.ms) ? 'n/a' : `${v.over ? '>' : ''}${v.ms >= 100 ? Math.round(v.ms).toLocaleString('en-US') : v.ms.toFixed(1)} ms`;

export function count(f: Figure): string {
  const n = f.samples.length + f.timeouts;
  const parts = [`n=${n}`];
  if (f.timeouts > 0) parts.push(`${f.timeouts} timed out at ${f.timeoutMs / 1000} s`);
  if (f.error) parts.push(`stopped: ${f.error}`);
  return parts.join(', ');
}

export function describe(f: Figure): string {
  return `p50 ${ms(percentile(f, 0.5))} p99 ${ms(percentile(f, 0.99))} (${count(f)})`;
}

export const usable = (f: Figure) => !f.error && f.samples.length + f.timeouts > 0;
export const verdict = (met: boolean) => (met ? 'goal met' : 'MISSED');

/** loaded / empty of a percentile, with whether the loaded figure is only a lower bound. */
export function ratio(empty: Figure, loaded: Figure, q: number): { value: number; over: boolean } | undefined {
  const e = percentile(empty, q);
  const l = percentile(loaded, q);
  if (!usable(empty) || !usable(loaded) || e.over || !(e.ms > 0)) return undefined;
  return { value: l.ms / e.ms, over: l.over };
}

// ---------------------------------------------------------------------------------------------
// The database server's idleness and size.

/**
 * Waits until the database server and the service's processes together use under a tenth of
 * a core over a second, at most `maxMs`: a timed-out request may still be running there.
 */
export async function untilIdle(pids: number[], maxMs: number): Promise<void> {
  const start = Date.now();
  let before = pids.reduce((sum, pid) => sum + cpuTicks(pid), 0);
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = pids.reduce((sum, pid) => sum + cpuTicks(pid), 0);
    const busy = (now - before) / TICKS_PER_SECOND;
    before = now;
    if (busy < 0.1) {
      if (Date.now() - start > 5000) say(`  (waited ${((Date.now() - start) / 1000).toFixed(0)} s for the database to be idle)`);
      return;
    }
    if (Date.now() - start > maxMs) {
      say(`  (the database was still busy after ${maxMs / 1000} s; measuring anyway)`);
      return;
    }
  }
}

/** Bytes on disk under `dir` (allocated blocks, as du counts them). */
export function diskUsage(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += diskUsage(full);
    else if (entry.isFile()) total += fs.statSync(full).blocks * 512;
  }
  return total;
}
