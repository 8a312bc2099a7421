// Temporal's Worker Deployment Versioning, as Stupa uses it. Every worker polls as one version
// of the deployment (WORKER_DEPLOYMENT_NAME, WORKER_BUILD_ID: infra/build-id.ts). The current
// version takes every new workflow, and every workflow whose type moves with upgrades
// (AUTO_UPGRADE: all of ours, each says why in workflows/); a workflow's activities go to the
// workers of the version that runs it, so an activity's new arguments never meet an old worker.
// A rolling upgrade: the new workers start and poll; their build is made current (by the
// first of them, WORKER_PROMOTE=auto, or by `npm run admin -- temporal promote`); the old
// workers stop once they have nothing left to do.
import type { Connection } from '@temporalio/client';
import type { Config } from '../config.js';

export type WorkerVersion = NonNullable<Config['workerVersion']>;

export interface DeploymentVersions {
  deploymentName: string;
  /** The current build, null when none is (new workflows then go to unversioned workers). */
  current: string | null;
  versions: { buildId: string; createdAt: string | null; drainage: string }[];
}

const DRAINAGE = ['unspecified', 'draining', 'drained'];
// gRPC status codes (@grpc/grpc-js `status`), as setup.ts names them.
const NOT_FOUND = 5;
const FAILED_PRECONDITION = 9;

const grpcCode = (err: unknown) => (err as { code?: number }).code;

/** The deployment's current build and its versions; null when no worker of it has polled yet. */
export async function describeDeployment(
  connection: Connection,
  namespace: string,
  deploymentName: string,
): Promise<DeploymentVersions | null> {
  try {
    const { workerDeploymentInfo: info } = await connection.workflowService.describeWorkerDeployment({ namespace, deploymentName });
    const time = (t: { seconds?: unknown } | null | undefined) => (t?.seconds ? new Date(Number(t.seconds) * 1000).toISOString() : null);
    return {
      deploymentName,
      current: info?.routingConfig?.currentDeploymentVersion?.buildId || null,
      versions: (info?.versionSummaries ?? []).map((v) => ({
        buildId: v.deploymentVersion?.buildId ?? '',
        createdAt: time(v.createTime),
        drainage: DRAINAGE[Number(v.drainageInfo?.status ?? 0)] ?? 'unspecified',
      })),
    };
  } catch (err) {
    if (grpcCode(err) === NOT_FOUND) return null;
    throw err;
  }
}

/**
 * Makes `version` the deployment's current one; nothing when it is already. Temporal knows a
 * version once its workers' polls have reached it, so a worker that has just started is
 * retried for up to `waitMs`. Returns the build it replaced (null: none, or already current).
 */
export async function promoteVersion(
  connection: Connection,
  namespace: string,
  version: Pick<WorkerVersion, 'deploymentName' | 'buildId'>,
  options: { waitMs: number; identity?: string },
): Promise<{ previous: string | null; changed: boolean }> {
  const until = Date.now() + options.waitMs;
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    try {
      const described = await describeDeployment(connection, namespace, version.deploymentName);
      if (described?.current === version.buildId) return { previous: null, changed: false };
      const res = await connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        identity: options.identity ?? 'stupa',
      });
      const previous = res.previousDeploymentVersion?.buildId || null;
      return { previous, changed: true };
    } catch (err) {
      // NOT_FOUND / FAILED_PRECONDITION: the version's pollers have not reached the server yet.
      const code = grpcCode(err);
      const early = code === NOT_FOUND || code === FAILED_PRECONDITION;
      if (!early || Date.now() + wait > until) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
