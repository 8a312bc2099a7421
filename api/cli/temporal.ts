// `npm run admin -- temporal setup|check`: the namespace and search attributes the service
// needs of its Temporal (infra/temporal/setup.ts), for an operator who sets a server up before
// the first worker starts, or whose workers run with TEMPORAL_SETUP=off.
import { Connection } from '@temporalio/client';
import type { Config } from '../../infra/config.js';
import { SEARCH_ATTRIBUTES } from '../../infra/temporal/contracts/job.js';
import {
  checkTemporalSetup,
  connectionOptions,
  namespaceRetentionDays,
  setupTemporal,
  type TemporalSetup,
} from '../../infra/temporal/setup.js';

export interface TemporalReport {
  address: string;
  namespace: string;
  searchAttributes: string[];
  /** `temporal setup` only: what it did, and the namespace's retention (as asked when it
   * created the namespace, else as it was). */
  setup?: TemporalSetup & { retentionDays: number };
}

export async function temporalCommand(
  config: Pick<Config, 'temporal' | 'temporalSetup'>,
  action: 'setup' | 'check',
): Promise<TemporalReport> {
  const { address, namespace } = config.temporal;
  const connection = await Connection.connect(connectionOptions(config.temporal));
  try {
    const report: TemporalReport = { address, namespace, searchAttributes: [...SEARCH_ATTRIBUTES] };
    if (action === 'check') {
      await checkTemporalSetup(connection, namespace);
      return report;
    }
    const setup = await setupTemporal(connection, { namespace, retentionDays: config.temporalSetup.retentionDays });
    const retentionDays = (await namespaceRetentionDays(connection, namespace)) ?? config.temporalSetup.retentionDays;
    return { ...report, setup: { ...setup, retentionDays } };
  } finally {
    await connection.close();
  }
}

export function temporalText(report: TemporalReport): string {
  const where = `namespace ${report.namespace} on ${report.address}`;
  const attributes = report.searchAttributes.join(', ');
  const setup = report.setup;
  if (!setup) return `set up: ${where}, search attributes ${attributes}\n`;
  const retention = `retention ${setup.retentionDays} day${setup.retentionDays === 1 ? '' : 's'}`;
  if (!setup.namespaceCreated && setup.searchAttributesAdded.length === 0) {
    return `already set up: namespace ${report.namespace} (${retention}), search attributes ${attributes}\n`;
  }
  return [
    setup.namespaceCreated ? `created ${where} (${retention})` : `${where} exists (${retention}); left as it is`,
    setup.searchAttributesAdded.length > 0 ? `added search attributes ${setup.searchAttributesAdded.join(', ')} (Keyword)` : '',
    `set up: search attributes ${attributes}`,
  ]
    .filter(Boolean)
    .map((line) => `${line}\n`)
    .join('');
}
