// Contract of the sweep (workflows/sweep.ts), the scheduled safety net for what a Temporal
// outage can leave behind: content whose holds and Cluster pins differ (a sync signal that
// never went out), counters a killed request did not move, and pin requests whose workflow
// never started. Each round checks only the
// content whose holds changed since the last round (the change log); the audit
// (contracts/audit.ts) compares everything.
import type { JobContract } from './job.js';

/** The round over the change log (activities/holds.ts). */
export interface SweepHolds {
  /** Distinct pieces of content compared with Cluster. */
  checked: number;
  /** Of those, how many differed and had their sync workflow signalled. */
  resynced: number;
  /** Users' holdings and folders whose counters a change moved, compared with the records
   * (activities/counts.ts); users recounted and folders' counts set for what differed. */
  countsChecked: number;
  recounted: number;
  foldersSet: number;
}

export interface SweepResult extends SweepHolds {
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
