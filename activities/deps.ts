// What every activity factory receives: the components the worker owns. Its own module, so that
// the activity modules and the index that assembles them do not import each other.
import type { Config } from '../infra/config.js';
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import type { Database } from '../infra/db/index.js';
import type { Jobs } from '../infra/temporal/jobs.js';
import type { Kubo } from '../infra/ipfs/kubo.js';
import type { Logger } from '../infra/logger.js';

export interface ActivityDeps {
  config: Config;
  db: Database;
  kubo: Kubo;
  cluster: ClusterClient;
  jobs: Jobs;
  logger: Logger;
}
