// One IPFS Cluster peer (crdt consensus) driving a Kubo node: the pinning layer the service
// talks to through the Cluster REST API.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from './binaries.js';
import { childEnv, startProcess, writeFileAtomic } from './process.js';

const exec = promisify(execFile);

export interface ClusterPorts {
  /** REST API (what the service uses). */
  api: number;
  /** The peer's libp2p listener, for other cluster peers; TCP on loopback. */
  swarm: number;
}

export interface ClusterOptions {
  /** IPFS_CLUSTER_PATH: service.json, identity.json, the pin state. */
  dataDir: string;
  logDir: string;
  ports: ClusterPorts;
  /** The Kubo RPC API the peer pins on, e.g. http://127.0.0.1:5001. */
  kuboApiUrl: string;
  signal?: AbortSignal;
  /** Called with the server's pid as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

export interface ClusterPeer {
  /** http://127.0.0.1:PORT */
  apiUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/** The host and port of an http(s) URL as a multiaddress (Cluster wants multiaddresses). */
export function urlToMultiaddr(url: string): string {
  const u = new URL(url);
  const host = u.hostname === 'localhost' ? '127.0.0.1' : u.hostname.replace(/^\[|\]$/g, '');
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  const proto = /^\d+\.\d+\.\d+\.\d+$/.test(host) ? 'ip4' : host.includes(':') ? 'ip6' : 'dns';
  return `/${proto}/${host}/tcp/${port}`;
}

type Json = Record<string, Record<string, unknown>>;

/** The listeners and the Kubo address, re-applied on every start (ports change between runs). */
function applySettings(config: Json, options: ClusterOptions): void {
  const loopback = (port: number) => `/ip4/127.0.0.1/tcp/${port}`;
  Object.assign(config.cluster!, {
    peername: 'stupa',
    // TCP on loopback only (init also adds a QUIC listener on 0.0.0.0).
    listen_multiaddress: [loopback(options.ports.swarm)],
    announce_multiaddress: [],
    enable_relay_hop: false,
    // 0 turns mDNS discovery off; no peer_addresses and no --bootstrap: a cluster of one.
    mdns_interval: '0s',
    peer_addresses: [],
  });
  const api = config.api as Record<string, Record<string, unknown>>;
  api.restapi!.http_listen_multiaddress = loopback(options.ports.api);
  // The daemon starts only the APIs present in service.json. The IPFS proxy and the Pinning
  // Service API are not used by the service (it speaks REST to Cluster and serves its own
  // pinning API), so they are removed rather than given ports of their own.
  delete api.ipfsproxy;
  delete api.pinsvcapi;
  const ipfshttp = (config.ipfs_connector as Record<string, Record<string, unknown>>).ipfshttp!;
  ipfshttp.node_multiaddress = urlToMultiaddr(options.kuboApiUrl);
  // Metrics and tracing exporters stay off (their endpoints are only used when enabled;
  // the daemon's --stats/--tracing flags are not passed).
  const observations = config.observations as Record<string, Record<string, unknown>>;
  observations.metrics!.enable_stats = false;
  observations.tracing!.enable_tracing = false;
}

export async function startClusterPeer(options: ClusterOptions): Promise<ClusterPeer> {
  const service = binaryPath('cluster', 'ipfs-cluster-service');
  const env = { IPFS_CLUSTER_PATH: options.dataDir };
  // Cluster reads CLUSTER_* variables as overrides of service.json (CLUSTER_SECRET,
  // CLUSTER_RESTAPI_HTTPLISTENMULTIADDRESS, ...); the service's own CLUSTER_API_URL is
  // harmless, but an inherited override must not silently change the peer.
  const dropEnv = ['CLUSTER_', 'IPFS_CLUSTER_'];
  const configFile = path.join(options.dataDir, 'service.json');
  if (!fs.existsSync(configFile)) {
    fs.mkdirSync(options.dataDir, { recursive: true });
    // A fresh secret and peer identity per data directory.
    await exec(service, ['init', '--consensus', 'crdt'], { env: childEnv(dropEnv, env) });
  }
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as Json;
  applySettings(config, options);
  writeFileAtomic(configFile, `${JSON.stringify(config, null, 2)}\n`);

  const proc = startProcess({
    name: 'cluster',
    command: service,
    args: ['daemon'],
    logDir: options.logDir,
    env,
    dropEnv,
    onSpawn: options.onSpawn,
  });
  const apiUrl = `http://127.0.0.1:${options.ports.api}`;
  try {
    // Healthy means the REST API answers AND the peer reaches its Kubo; before that, pins
    // would fail.
    await proc.waitFor(
      async () => {
        const res = await fetch(`${apiUrl}/id`, { signal: AbortSignal.timeout(2000) });
        if (!res.ok) throw new Error(`/id answered ${res.status}`);
        const peer = (await res.json()) as { error?: string; ipfs?: { id?: string; error?: string } };
        if (peer.error) throw new Error(peer.error);
        if (!peer.ipfs?.id || peer.ipfs.error) throw new Error(`Kubo not reachable yet: ${peer.ipfs?.error || 'no ipfs id'}`);
      },
      { timeoutMs: 60_000, what: 'answer from GET /id with Kubo connected', signal: options.signal },
    );
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { apiUrl, pid: proc.pid, stop: () => proc.stop() };
}
