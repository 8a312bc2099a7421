// One IPFS Cluster peer (crdt consensus) driving the stack's Kubo.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from './binaries.js';
import { launch, waitHealthy, type Managed } from './process.js';

const exec = promisify(execFile);

export interface ClusterPorts {
  api: number;
  swarm: number;
  proxy: number;
  pinsvc: number;
}

export interface ClusterPeer {
  apiUrl: string;
  process: Managed;
}

/** host:port of an http URL as a multiaddress. */
function toMultiaddr(url: string): string {
  const u = new URL(url);
  return `/ip4/${u.hostname === 'localhost' ? '127.0.0.1' : u.hostname}/tcp/${u.port || (u.protocol === 'https:' ? 443 : 80)}`;
}

/**
 * `init` once (fresh secret and identity), then every start re-applies the listeners (all on
 * loopback, TCP only, no mDNS, no relay) and the Kubo address, keeping the pin state.
 */
export async function startClusterPeer(options: {
  dataDir: string;
  logDir: string;
  ports: ClusterPorts;
  kuboApiUrl: string;
}): Promise<ClusterPeer> {
  const service = binaryPath('cluster', 'ipfs-cluster-service');
  const env = { IPFS_CLUSTER_PATH: options.dataDir };
  const configFile = path.join(options.dataDir, 'service.json');
  if (!fs.existsSync(configFile)) {
    fs.mkdirSync(options.dataDir, { recursive: true });
    await exec(service, ['init', '--consensus', 'crdt'], { env: { ...process.env, ...env } });
  }
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8'));
  const loopback = (port: number) => `/ip4/127.0.0.1/tcp/${port}`;
  Object.assign(config.cluster, {
    peername: 'stupa',
    listen_multiaddress: [loopback(options.ports.swarm)],
    enable_relay_hop: false,
    mdns_interval: '0s',
    peer_addresses: [],
  });
  config.api.restapi.http_listen_multiaddress = loopback(options.ports.api);
  config.api.ipfsproxy.listen_multiaddress = loopback(options.ports.proxy);
  config.api.ipfsproxy.node_multiaddress = toMultiaddr(options.kuboApiUrl);
  config.api.pinsvcapi.http_listen_multiaddress = loopback(options.ports.pinsvc);
  config.ipfs_connector.ipfshttp.node_multiaddress = toMultiaddr(options.kuboApiUrl);
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2));

  const proc = launch('cluster', service, ['daemon'], { logDir: options.logDir, env });
  const apiUrl = `http://127.0.0.1:${options.ports.api}`;
  try {
    await waitHealthy(proc, async () => {
      const res = await fetch(`${apiUrl}/id`);
      if (!res.ok) throw new Error(`/id answered ${res.status}`);
      const peer = (await res.json()) as { error?: string; ipfs?: { id?: string; error?: string } };
      if (peer.error || !peer.ipfs?.id || peer.ipfs.error)
        throw new Error(`not connected to Kubo yet: ${peer.ipfs?.error ?? peer.error ?? ''}`);
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { apiUrl, process: proc };
}
