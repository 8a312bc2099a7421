// Kubo of the local stack (tests start extra nodes with the same function).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from './binaries.js';
import { launch, waitHealthy, type Managed } from './process.js';

const exec = promisify(execFile);

export interface KuboNode {
  apiUrl: string;
  gatewayUrl: string;
  peerId: string;
  /** Dialable swarm address with the peer ID, e.g. /ip4/127.0.0.1/tcp/4001/p2p/12D3… */
  swarmAddress: string;
  process: Managed;
}

export interface KuboPorts {
  api: number;
  gateway: number;
  swarm: number;
}

/**
 * The repo is made once with the `unixfs-v1-2025` profile (CIDv1, raw leaves, 1 MiB chunks,
 * balanced DAGs: the CIDs the service promises) and the `test` profile (loopback addresses,
 * no bootstrap peers, no mDNS, no AutoConf fetch from the internet). Every start re-applies
 * the ports, so a restart on the same data directory keeps the content.
 */
export async function startKubo(options: { dataDir: string; logDir: string; ports: KuboPorts; name?: string }): Promise<KuboNode> {
  const name = options.name ?? 'kubo';
  const ipfs = binaryPath('kubo', 'ipfs');
  const env = { IPFS_PATH: options.dataDir };
  const configFile = path.join(options.dataDir, 'config');
  if (!fs.existsSync(configFile)) {
    fs.mkdirSync(options.dataDir, { recursive: true });
    await exec(ipfs, ['init', '--profile', 'unixfs-v1-2025,test'], { env: { ...process.env, ...env } });
  }
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8'));
  config.Addresses.API = `/ip4/127.0.0.1/tcp/${options.ports.api}`;
  config.Addresses.Gateway = `/ip4/127.0.0.1/tcp/${options.ports.gateway}`;
  config.Addresses.Swarm = [`/ip4/127.0.0.1/tcp/${options.ports.swarm}`];
  config.Bootstrap = [];
  // No public DHT: blocks come over bitswap from peers the service dials (swarm connect).
  config.Routing = { ...config.Routing, Type: 'none' };
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2));

  const proc = launch(name, ipfs, ['daemon', '--migrate=true', '--enable-gc=false'], { logDir: options.logDir, env });
  const apiUrl = `http://127.0.0.1:${options.ports.api}`;
  let peerId = '';
  try {
    await waitHealthy(proc, async () => {
      const res = await fetch(`${apiUrl}/api/v0/id`, { method: 'POST' });
      if (!res.ok) throw new Error(`id answered ${res.status}`);
      peerId = ((await res.json()) as { ID: string }).ID;
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return {
    apiUrl,
    gatewayUrl: `http://127.0.0.1:${options.ports.gateway}`,
    peerId,
    swarmAddress: `/ip4/127.0.0.1/tcp/${options.ports.swarm}/p2p/${peerId}`,
    process: proc,
  };
}
