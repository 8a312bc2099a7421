// Activities: every side effect of the workflows, built by one factory from the components
// the worker owns (temporalio/samples-typescript style). Workflows import only the *type*
// of what this returns.
import type { Config } from '../infra/config.js';
import type { ClusterClient } from '../infra/cluster.js';
import type { Database } from '../infra/db/index.js';
import type { Kubo } from '../infra/kubo.js';
import type { Logger } from '../infra/logger.js';

export interface ActivityDeps {
  config: Config;
  db: Database;
  kubo: Kubo;
  cluster: ClusterClient;
  logger: Logger;
}

// eslint-disable-next-line @typescript-eslint/no-unused-vars
export function createActivities(deps: ActivityDeps) {
  return {};
}

export type Activities = ReturnType<typeof createActivities>;
