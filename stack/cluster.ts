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
  /** Log file name and peer name: 'cluster' unless given (the second peer of a stack: 'cluster-2'). */
  name?: string;
  /** A several-peer stack: every peer's secret (the first peer's), and the other peers'
   * dialable addresses (/ip4/127.0.0.1/tcp/PORT/p2p/ID), which each peer keeps connecting to. */
  secret?: string;
  peerAddresses?: string[];
  signal?: AbortSignal;
  /** Called with the server's pid as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

export interface ClusterPeer {
  /** http://127.0.0.1:PORT */
  apiUrl: string;
  /** The peer's ID (identity.json). */
  id: string;
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
  const peers = options.peerAddresses ?? [];
  Object.assign(config.cluster!, {
    peername: options.name === undefined || options.name === 'cluster' ? 'stupa' : `stupa-${options.name.replace(/^cluster-/, '')}`,
    // TCP on loopback only (init also adds a QUIC listener on 0.0.0.0).
    listen_multiaddress: [loopback(options.ports.swarm)],
    announce_multiaddress: [],
    enable_relay_hop: false,
    // 0 turns mDNS discovery off; the peers are the ones listed (none: a cluster of one).
    mdns_interval: '0s',
    peer_addresses: peers,
    ...(options.secret ? { secret: options.secret } : {}),
  });
  // Set either way, so a data directory that ran with several peers and then with one (or the
  // other way round) ends up as a fresh one would.
  const several = peers.length > 0;
  Object.assign(config.cluster!, {
    // With several peers, a peer whose ping is missed twice (10 s) is taken for gone, and its
    // pins are given to live peers until each has its replication minimum again (Cluster's
    // defaults leave them under-replicated: disable_repinning true, pings every 15 s).
    disable_repinning: !several,
    monitor_ping_interval: several ? '5s' : '15s',
    // A peer given a lost peer's pins retries the ones whose pin failed (an error from its Kubo,
    // or the pin missing there) at this interval: every minute with several peers instead of
    // every 12, so replication comes back within a minute of such a failure. Each retry
    // round lists the peer's pins, which is why the single peer keeps Cluster's default.
    pin_recover_interval: several ? '1m0s' : '12m0s',
  });
  // How often the monitor looks for expired metrics (and so raises the alert that repins).
  (config.monitor as Record<string, Record<string, unknown>>).pubsubmon!.check_interval = several ? '5s' : '15s';
  // A peer that was down learns the pins added meanwhile from the next rebroadcast of the
  // others' CRDT heads: every 10 s with several peers instead of every minute.
  (config.consensus as Record<string, Record<string, unknown>>).crdt!.rebroadcast_interval = several ? '10s' : '1m0s';
  // A pin is allocated among the peers whose informer metrics (tags, free space, queue) this
  // peer has; each is sent every TTL/2, the first at start, before the other peers are
  // connected. 10 s instead of 30 s makes a new peer a candidate within 5 s.
  for (const informer of Object.values(config.informer as Record<string, Record<string, unknown>>)) {
    informer.metric_ttl = several ? '10s' : '30s';
  }
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

// Cluster reads CLUSTER_* variables as overrides of service.json (CLUSTER_SECRET,
// CLUSTER_RESTAPI_HTTPLISTENMULTIADDRESS, ...); the service's own CLUSTER_API_URL is
// harmless, but an inherited override must not silently change the peer.
const DROP_ENV = ['CLUSTER_', 'IPFS_CLUSTER_'];

/**
 * Creates the peer's configuration if needed (a fresh secret and identity per data directory)
 * and returns its ID and secret, before the daemon runs: the peers of a several-peer stack
 * are given the first one's secret and each other's addresses to start with.
 */
export async function clusterIdentity(dataDir: string): Promise<{ id: string; secret: string }> {
  const configFile = path.join(dataDir, 'service.json');
  if (!fs.existsSync(configFile)) {
    fs.mkdirSync(dataDir, { recursive: true });
    const service = binaryPath('cluster', 'ipfs-cluster-service');
    await exec(service, ['init', '--consensus', 'crdt'], { env: childEnv(DROP_ENV, { IPFS_CLUSTER_PATH: dataDir }) });
  }
  const identity = JSON.parse(fs.readFileSync(path.join(dataDir, 'identity.json'), 'utf8')) as { id: string };
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as { cluster: { secret: string } };
  return { id: identity.id, secret: config.cluster.secret };
}

export async function startClusterPeer(options: ClusterOptions): Promise<ClusterPeer> {
  const service = binaryPath('cluster', 'ipfs-cluster-service');
  const env = { IPFS_CLUSTER_PATH: options.dataDir };
  const dropEnv = DROP_ENV;
  const configFile = path.join(options.dataDir, 'service.json');
  const { id } = await clusterIdentity(options.dataDir);
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as Json;
  applySettings(config, options);
  writeFileAtomic(configFile, `${JSON.stringify(config, null, 2)}\n`);

  const proc = startProcess({
    name: options.name ?? 'cluster',
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
  return { apiUrl, id, pid: proc.pid, stop: () => proc.stop() };
}
