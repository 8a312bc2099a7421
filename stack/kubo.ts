// A Kubo node of the local stack. Tests start extra, independent nodes with the same
// function (own directory, own ports) to check that content moves between peers.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from './binaries.js';
import { childEnv, startProcess, writeFileAtomic } from './process.js';

const exec = promisify(execFile);

export interface KuboPorts {
  api: number;
  gateway: number;
  swarm: number;
}

export interface KuboOptions {
  /** IPFS_PATH of the node: created on first start, reused (content kept) afterwards. */
  dataDir: string;
  logDir: string;
  ports: KuboPorts;
  /** Log file name and label; 'kubo' unless given (a second node in a test: 'kubo-2'). */
  name?: string;
  /** The other Kubo nodes of a several-peer stack: kept connected (Kubo's Peering), so a
   * Cluster peer's pin fetches the blocks from the node that has them. */
  peering?: { id: string; addrs: string[] }[];
  signal?: AbortSignal;
  /** Called with the server's pid as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

export interface KuboNode {
  /** http://127.0.0.1:PORT (the RPC API, /api/v0/...) */
  apiUrl: string;
  gatewayUrl: string;
  peerId: string;
  /** Dialable swarm address with the peer ID: /ip4/127.0.0.1/tcp/PORT/p2p/12D3… */
  swarmAddress: string;
  pid: number;
  stop(): Promise<void>;
}

/** Sets `value` at a dotted path of a JSON object, creating the objects on the way. */
function setIn(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[keys[keys.length - 1]!] = value;
}

/**
 * Everything that keeps the node local, applied on every start so a repo made by an older
 * version of this file, or with other ports, ends up the same. The `test` profile applied at
 * init sets most of it already; restating it here makes the guarantees visible and durable.
 */
function localSettings(ports: KuboPorts, peering: KuboOptions['peering'] = []): Record<string, unknown> {
  return {
    'Addresses.API': `/ip4/127.0.0.1/tcp/${ports.api}`,
    'Addresses.Gateway': `/ip4/127.0.0.1/tcp/${ports.gateway}`,
    // The service's gateway reads through this one (infra/ipfs/kubo-gateway.ts): only blocks the
    // node has, never a fetch from the network on a reader's behalf.
    'Gateway.NoFetch': true,
    // TCP on loopback only: no QUIC/WebTransport/WebRTC listeners, no /ip6.
    'Addresses.Swarm': [`/ip4/127.0.0.1/tcp/${ports.swarm}`],
    'Addresses.Announce': [],
    'Swarm.Transports.Network.TCP': true,
    'Swarm.Transports.Network.QUIC': false,
    'Swarm.Transports.Network.WebTransport': false,
    'Swarm.Transports.Network.WebRTCDirect': false,
    'Swarm.Transports.Network.Websocket': false,
    'Swarm.Transports.Network.Relay': false,
    'Swarm.RelayClient.Enabled': false,
    'Swarm.RelayService.Enabled': false,
    'Swarm.EnableHolePunching': false,
    'Swarm.DisableNatPortMap': true,
    'AutoNAT.ServiceMode': 'disabled',
    'AutoTLS.Enabled': false,
    // Generous limits with a grace period, so a peer the service dialled with `swarm connect`
    // is not trimmed while a transfer from it is starting.
    'Swarm.ConnMgr': { Type: 'basic', LowWater: 50, HighWater: 200, GracePeriod: '1m0s' },
    Bootstrap: [],
    // Peering reconnects (with backoff) to a listed peer that went away and came back.
    'Peering.Peers': peering.map((p) => ({ ID: p.id, Addrs: p.addrs })),
    'Discovery.MDNS.Enabled': false,
    // AutoConf fetches bootstrap peers, resolvers and routers from the internet at start.
    'AutoConf.Enabled': false,
    // The DHT, with no bootstrap peers: only its local-network half has peers (loopback ones
    // the node is connected to), so nothing is looked up or announced outside. It stores the
    // IPNS records the service puts and serves them to connected peers; with 'none', Kubo
    // answered a `routing put` 200 and stored nothing (measured). Content is not announced
    // (Provide.Enabled): bitswap asks the peers the node is connected to, which is how blocks
    // arrive from a peer added with `ipfs swarm connect` (tests/stack.test.ts checks it).
    'Routing.Type': 'dht',
    'Provide.Enabled': false,
    // Kubo's telemetry plugin reports to telemetry.ipshipyard.dev unless told off.
    'Plugins.Plugins.telemetry.Config.Mode': 'off',
  };
}

// LIBP2P_* and other IPFS_* variables (e.g. LIBP2P_FORCE_PNET) would change the node.
const DROP_ENV = ['IPFS_', 'LIBP2P_'];

async function ensureRepo(ipfs: string, dataDir: string, env: Record<string, string>): Promise<void> {
  if (fs.existsSync(path.join(dataDir, 'config'))) return;
  fs.mkdirSync(dataDir, { recursive: true });
  // unixfs-v1-2025: CIDv1, raw leaves, sha2-256, 1 MiB chunks, 1024 links per node (the
  // CIDs the service promises; "hello world" is bafkrei…). test: loopback addresses, no
  // bootstrap peers, no mDNS, no AutoConf.
  await exec(ipfs, ['init', '--profile', 'unixfs-v1-2025,test'], { env: childEnv(DROP_ENV, env) });
}

/** Creates the node's repository if needed and returns its peer ID, before the daemon runs:
 * the nodes of a several-peer stack are told each other's IDs to start with. */
export async function kuboPeerId(dataDir: string): Promise<string> {
  await ensureRepo(binaryPath('kubo', 'ipfs'), dataDir, { IPFS_PATH: dataDir, IPFS_TELEMETRY: 'off' });
  const config = JSON.parse(fs.readFileSync(path.join(dataDir, 'config'), 'utf8')) as { Identity: { PeerID: string } };
  return config.Identity.PeerID;
}

export async function startKubo(options: KuboOptions): Promise<KuboNode> {
  const name = options.name ?? 'kubo';
  const ipfs = binaryPath('kubo', 'ipfs');
  // IPFS_TELEMETRY=off as well, in case the config is edited by hand.
  const env = { IPFS_PATH: options.dataDir, IPFS_TELEMETRY: 'off' };
  await ensureRepo(ipfs, options.dataDir, env);

  // Edited as a file rather than with `ipfs config` (one process per key): the daemon is not
  // running yet, and unknown keys are kept as they are.
  const configFile = path.join(options.dataDir, 'config');
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as Record<string, unknown>;
  for (const [key, value] of Object.entries(localSettings(options.ports, options.peering))) setIn(config, key, value);
  writeFileAtomic(configFile, `${JSON.stringify(config, null, 2)}\n`);

  const proc = startProcess({
    name,
    command: ipfs,
    // Not --offline: `swarm connect` to other local peers must work. --migrate=true answers
    // the repo-migration prompt (a Kubo upgrade in versions.json) without a terminal; GC is
    // off because pins are the service's business.
    args: ['daemon', '--migrate=true', '--enable-gc=false'],
    logDir: options.logDir,
    env,
    dropEnv: DROP_ENV,
    onSpawn: options.onSpawn,
  });
  const apiUrl = `http://127.0.0.1:${options.ports.api}`;
  let peerId: string;
  try {
    peerId = await proc.waitFor(
      async () => {
        const res = await fetch(`${apiUrl}/api/v0/id`, { method: 'POST', signal: AbortSignal.timeout(2000) });
        if (!res.ok) throw new Error(`/api/v0/id answered ${res.status}`);
        return ((await res.json()) as { ID: string }).ID;
      },
      { timeoutMs: 60_000, what: 'answer from POST /api/v0/id', signal: options.signal },
    );
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return {
    apiUrl,
    gatewayUrl: `http://127.0.0.1:${options.ports.gateway}`,
    peerId,
    swarmAddress: `/ip4/127.0.0.1/tcp/${options.ports.swarm}/p2p/${peerId}`,
    pid: proc.pid,
    stop: () => proc.stop(),
  };
}
