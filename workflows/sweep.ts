// Scheduled safety net: compares Cluster with the holds and re-runs the sync of any content
// where they differ (e.g. Temporal was down just after a hold changed, so no signal went out).
import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { resyncDifferences } = proxyLocalActivities<Activities>({ startToCloseTimeout: '5m' });

export async function sweepWorkflow(): Promise<number> {
  return resyncDifferences();
}
