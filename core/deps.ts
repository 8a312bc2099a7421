// What every use-case is given: the components, built once by the surface's server (or the
// CLI), and who is asking. Use-cases take plain values and return plain records.
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import type { Config } from '../infra/config.js';
import type { ApiKey } from '../infra/db/api-keys.js';
import type { Database } from '../infra/db/index.js';
import type { EdgeAnswers } from '../edge/purge.js';
import type { Kubo } from '../infra/ipfs/kubo.js';
import type { Plan } from '../infra/plans.js';
import type { User } from '../infra/db/users.js';
import type { Jobs } from '../infra/temporal/jobs.js';
import type { ContentPeers } from './peers.js';

export interface UseCaseDeps {
  config: Config;
  db: Database;
  jobs: Jobs;
  kubo: Kubo;
  /** IPFS Cluster: uploads pin what they add inline (core/hold-sync.ts). */
  cluster: ClusterClient;
  /** The edges' kept gateway answers, forgotten when an account's access rules change. */
  edgeAnswers: EdgeAnswers;
  /** Cluster's view of a content's peers, for GET /pin/:cid (pins.ts). */
  peers: ContentPeers;
}

/** An authenticated caller: the user, their plan, and the key they used (none from the CLI). */
export interface Caller {
  user: User;
  plan: Plan;
  key?: ApiKey;
}
