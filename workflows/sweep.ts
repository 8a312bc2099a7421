// The scheduled safety net (contract: infra/temporal/contracts/sweep.ts).
import { proxyLocalActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { SweepWorkflow } from '../infra/temporal/contracts/sweep.js';

const { resyncDifferences, resumeStalledPins } = proxyLocalActivities<Activities>({ startToCloseTimeout: '5m' });

export const sweepWorkflow: SweepWorkflow = async () => {
  const holds = await resyncDifferences();
  return { ...holds, resumed: await resumeStalledPins() };
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// One round a minute from a schedule, on whatever code runs now: nothing to keep.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, sweepWorkflow);
