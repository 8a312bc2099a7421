// The worker's logs: the Temporal SDK's own lines (worker state, the bundle, Core) go through
// the service's pino logger at LOG_LEVEL, like every other line; webpack's listing is at debug.
import fs from 'node:fs';
import { startWorkerProcess } from '../stack/services.js';
import { tempDir, testEnv } from './support/stack.js';

/** Starts a worker at `level`, stops it gracefully, and returns its output, one line a row. */
async function workerLines(level: string): Promise<string[]> {
  const worker = await startWorkerProcess(testEnv({ LOG_LEVEL: level }), { logDir: tempDir('stupa-worker-log-') });
  await worker.stop();
  const text = fs.readFileSync(worker.logFile, 'utf8');
  // The first line is process.ts's own header (the command it started).
  return text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('--- '));
}

test('at LOG_LEVEL=warn a worker that starts and stops normally prints nothing', async () => {
  // No bundle listing, no SDK INFO lines, no warning about the activities-only waits queue.
  // TMPRL1104 ("Workflow task duration exceeded 5 seconds") is the one warning a normal start
  // may print: it measures the machine, not the worker (the first task of the sweep took 7.5 s
  // once on a loaded 2-core CI machine), and an operator should see it when it is true.
  const lines = await workerLines('warn');
  expect(lines.filter((line) => !line.includes('[TMPRL1104]'))).toEqual([]);
}, 60_000);

test("at LOG_LEVEL=info the SDK's own lines arrive as pino JSON", async () => {
  const lines = await workerLines('info');
  const entries = lines.map((line) => JSON.parse(line) as { level: number; msg: string; component?: string; name?: string });
  const sdk = entries.filter((e) => e.component === 'temporal');
  expect(sdk.length).toBeGreaterThan(0);
  expect(sdk.every((e) => e.name === 'stupa-worker' && e.level >= 30)).toBe(true);
  expect(entries.map((e) => e.msg)).toContain('worker polling');
  // The bundle's one-line summary, not webpack's listing of its modules (that is at debug).
  expect(entries.map((e) => e.msg)).toContain('Workflow bundle created');
  expect(entries.filter((e) => /^webpack \d+\.\d+\.\d+ compiled/m.test(e.msg))).toEqual([]);
}, 60_000);
