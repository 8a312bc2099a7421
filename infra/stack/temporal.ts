// Temporal's development server (SQLite file, optional Web UI) with the search attributes
// the workflows set, so the UI finds any job by CID or user.
import path from 'node:path';
import fs from 'node:fs';
import { Connection } from '@temporalio/client';
import { binaryPath } from './binaries.js';
import { launch, waitHealthy, type Managed } from './process.js';

export const SEARCH_ATTRIBUTES = { Cid: 'Keyword', UserId: 'Keyword' } as const;

export interface TemporalPorts {
  frontend: number;
  http: number;
  metrics: number;
  ui?: number;
}

export interface TemporalServer {
  address: string;
  uiUrl?: string;
  process: Managed;
}

export async function startTemporal(options: { dataDir: string; logDir: string; ports: TemporalPorts }): Promise<TemporalServer> {
  fs.mkdirSync(options.dataDir, { recursive: true });
  const { ports } = options;
  const args = [
    'server',
    'start-dev',
    '--db-filename',
    path.join(options.dataDir, 'temporal.db'),
    '--ip',
    '127.0.0.1',
    '--port',
    String(ports.frontend),
    // Its other listeners default to ports derived from --port or fixed ones; name them all
    // so stacks side by side never collide.
    '--http-port',
    String(ports.http),
    '--metrics-port',
    String(ports.metrics),
    ...(ports.ui ? ['--ui-port', String(ports.ui), '--ui-ip', '127.0.0.1'] : ['--headless']),
    '--namespace',
    'default',
    '--log-level',
    'warn',
    ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`]),
  ];
  const proc = launch('temporal', binaryPath('temporal', 'temporal'), args, { logDir: options.logDir });
  const address = `127.0.0.1:${ports.frontend}`;
  try {
    await waitHealthy(proc, async () => {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
        for (const name of Object.keys(SEARCH_ATTRIBUTES)) {
          if (!res.customAttributes?.[name]) throw new Error(`search attribute ${name} is not registered yet`);
        }
      } finally {
        await connection.close();
      }
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { address, uiUrl: ports.ui ? `http://127.0.0.1:${ports.ui}` : undefined, process: proc };
}
