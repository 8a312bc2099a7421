// `npm run admin -- temporal versions|promote`: the Worker Deployment's versions
// (infra/temporal/versioning.ts), and making a build the current one, for a rolling upgrade
// whose workers run with WORKER_PROMOTE=manual, or to roll back to the previous build.
import { Connection } from '@temporalio/client';
import type { Config } from '../../infra/config.js';
import { ConfigError } from '../../infra/errors.js';
import { connectionOptions } from '../../infra/temporal/setup.js';
import { describeDeployment, promoteVersion, type DeploymentVersions } from '../../infra/temporal/versioning.js';

export interface VersionsReport extends DeploymentVersions {
  /** `promote` only: the build made current and the one it replaced. */
  promoted?: { buildId: string; previous: string | null; changed: boolean };
}

export async function versionsCommand(
  config: Pick<Config, 'temporal' | 'workerVersion'>,
  action: 'versions' | 'promote',
  buildId?: string,
): Promise<VersionsReport> {
  const version = config.workerVersion;
  if (!version) throw new ConfigError(['WORKER_VERSIONING is off: the workers poll unversioned']);
  const connection = await Connection.connect(connectionOptions(config.temporal));
  try {
    const { namespace } = config.temporal;
    let promoted: VersionsReport['promoted'];
    if (action === 'promote') {
      const target = { deploymentName: version.deploymentName, buildId: buildId ?? version.buildId };
      // An operator names a build whose workers already poll: no waiting for them.
      const result = await promoteVersion(connection, namespace, target, { waitMs: 0, identity: 'stupa-admin' });
      promoted = { buildId: target.buildId, ...result };
    }
    const described = (await describeDeployment(connection, namespace, version.deploymentName)) ?? {
      deploymentName: version.deploymentName,
      current: null,
      versions: [],
    };
    return { ...described, ...(promoted ? { promoted } : {}) };
  } finally {
    await connection.close();
  }
}

export function versionsText(report: VersionsReport): string {
  const lines = [];
  if (report.promoted)
    lines.push(
      report.promoted.changed
        ? `${report.promoted.buildId} is now current (was ${report.promoted.previous ?? 'none'})`
        : `${report.promoted.buildId} was current already`,
    );
  lines.push(`deployment ${report.deploymentName}: current ${report.current ?? 'none (unversioned workers take new workflows)'}`);
  for (const v of report.versions)
    lines.push(`  ${v.buildId}${v.buildId === report.current ? ' (current)' : ''}: since ${v.createdAt ?? '?'}, ${v.drainage}`);
  return `${lines.join('\n')}\n`;
}
