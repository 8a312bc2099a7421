// Scheduled safety net for what a Temporal outage can leave behind: content whose holds and
// Cluster pins differ (a sync signal that never went out), and pin requests whose workflow
// never started.
import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { resyncDifferences, resumeStalledPins } = proxyLocalActivities<Activities>({ startToCloseTimeout: '5m' });

export async function sweepWorkflow(): Promise<{ resynced: number; resumed: number }> {
  return { resynced: await resyncDifferences(), resumed: await resumeStalledPins() };
}
