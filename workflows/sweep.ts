// The scheduled safety net (contract: infra/temporal/contracts/sweep.ts).
import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { SweepWorkflow } from '../infra/temporal/contracts/sweep.js';

const { resyncDifferences, resumeStalledPins } = proxyLocalActivities<Activities>({ startToCloseTimeout: '5m' });

export const sweepWorkflow: SweepWorkflow = async () => {
  const holds = await resyncDifferences();
  return { ...holds, resumed: await resumeStalledPins() };
};
