// Contract of the sweep (workflows/sweep.ts), the scheduled safety net for what a Temporal
// outage can leave behind: content whose holds and Cluster pins differ (a sync signal that
// never went out), and pin requests whose workflow never started. Each round checks only the
// content whose holds changed since the last round (the change log); the audit
// (contracts/audit.ts) compares everything.
import type { JobContract } from './job.js';

export interface SweepResult {
  /** Distinct pieces of content compared with Cluster. */
  checked: number;
  /** Of those, how many differed and had their sync workflow signalled. */
  resynced: number;
  resumed: number;
}
export type SweepWorkflow = () => Promise<SweepResult>;

export const sweepJob: JobContract<void, void> & { scheduleId(base: string): string; every: string } = {
  workflowType: 'sweepWorkflow',
  taskQueue: (base) => base,
  workflowId: () => 'sweep',
  searchAttributes: () => ({}),
  // One schedule per task queue, so deployments (and test runs) sharing a namespace do not share it.
  scheduleId: (base) => `stupa-sweep-holds:${base}`,
  every: '1m',
};
