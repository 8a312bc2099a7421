// A second, independent Kubo node: content that exists only there can reach the stack's
// Kubo only through an origin the test gives.
import path from 'node:path';
import { startKubo, type KuboNode } from '../../stack/kubo.js';
import { freePorts } from '../../stack/ports.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { tempDir } from './stack.js';

export async function startSecondNode(dataDir = tempDir('stupa-kubo2-'), ports?: { api: number; gateway: number; swarm: number }) {
  const [api, gateway, swarm] = ports ? [ports.api, ports.gateway, ports.swarm] : await freePorts(3);
  const node: KuboNode = await startKubo({
    dataDir: path.join(dataDir, 'repo'),
    logDir: path.join(dataDir, 'logs'),
    ports: { api: api!, gateway: gateway!, swarm: swarm! },
    name: 'kubo-2',
  });
  return { node, client: createKubo(node.apiUrl), dataDir, ports: { api: api!, gateway: gateway!, swarm: swarm! } };
}
