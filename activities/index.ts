// Activities: every side effect of the workflows, built by one factory from the components
// the worker owns (temporalio/samples-typescript style). Workflows import only the *type*
// of what this returns.
import type { Config } from '../infra/config.js';
import type { ClusterClient } from '../infra/cluster.js';
import type { Database } from '../infra/db/index.js';
import type { Jobs } from '../infra/temporal/jobs.js';
import type { Kubo } from '../infra/kubo.js';
import type { Logger } from '../infra/logger.js';
import { createHoldActivities } from './holds.js';
import { createIpnsActivities } from './ipns.js';
import { createMultipartActivities } from './multipart.js';
import { createPinActivities } from './pins.js';
import { createSnapshotActivities } from './snapshots.js';

export interface ActivityDeps {
  config: Config;
  db: Database;
  kubo: Kubo;
  cluster: ClusterClient;
  jobs: Jobs;
  logger: Logger;
}

export function createActivities(deps: ActivityDeps) {
  return {
    ...createPinActivities(deps),
    ...createHoldActivities(deps),
    ...createSnapshotActivities(deps),
    ...createIpnsActivities(deps),
    ...createMultipartActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
