// The local stack as the process manager of the production shape: a piece that exits while the
// stack runs (killed, crashed) is started again, as systemd's Restart=always or a Kubernetes
// Deployment would do in production (docs/operations/production.md).
import type { ManagedProcess } from './process.js';

/** How often a piece is checked, and the least time between two starts of one piece. */
const WATCH_MS = 500;
const BACKOFF_MS = 1000;

export interface KeptProcess {
  name: string;
  /** The current process (a new one after each restart). */
  current(): ManagedProcess;
  /** How many times it was started again. */
  restarts(): number;
  /** Stops watching, then stops the process. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `start()` and starts it again whenever its process has exited, until stop(). A start
 * that throws is tried again after the back-off; `say` reports each restart and failure.
 */
export async function keepRunning(name: string, start: () => Promise<ManagedProcess>, say: (line: string) => void): Promise<KeptProcess> {
  let proc = await start();
  let restarts = 0;
  let stopped = false;
  let busy = false;
  let lastStart = Date.now();
  const timer = setInterval(() => {
    if (stopped || busy || proc.running() || Date.now() - lastStart < BACKOFF_MS) return;
    busy = true;
    lastStart = Date.now();
    say(`${name} exited; starting it again (its log: ${proc.logFile})`);
    start()
      .then(async (next) => {
        restarts++;
        if (stopped) await next.stop();
        else proc = next;
      })
      .catch((err: Error) => say(`${name} did not start again: ${err.message.split('\n')[0]}; trying again`))
      .finally(() => {
        busy = false;
      });
  }, WATCH_MS);
  timer.unref();
  return {
    name,
    current: () => proc,
    restarts: () => restarts,
    async stop(graceMs) {
      stopped = true;
      clearInterval(timer);
      // A restart under way finishes first, so its process is the one stopped.
      while (busy) await new Promise((r) => setTimeout(r, 50));
      await proc.stop(graceMs);
    },
  };
}
