// The scheduled safety net (contract: infra/temporal/contracts/sweep.ts).
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { SweepWorkflow } from '../infra/temporal/contracts/sweep.js';

const { resyncDifferences, resumeStalledPins } = proxyLocalActivities<Activities>({ startToCloseTimeout: '5m' });
// The full comparison reads every hold and every Cluster pin: a regular activity, given time.
const { resyncEverything } = proxyActivities<Activities>({ startToCloseTimeout: '1h' });

export const sweepWorkflow: SweepWorkflow = async (input = {}) => {
  const holds = input.full ? await resyncEverything() : await resyncDifferences();
  return { ...holds, resumed: await resumeStalledPins() };
};
