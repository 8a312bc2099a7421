// `npm start`: the whole service on the embedded local stack. Starts FerretDB, Temporal
// (with its Web UI), Kubo and an IPFS Cluster peer (each unless its URL is configured; STACK_PEERS
// Kubo + Cluster pairs), then the workers and REST API processes wired to them (STACK_WORKERS,
// STACK_APIS; one of each unless set), and prints where everything is.
// `--stack-only` (npm run stack) starts only the stack, for running `npm run api` and
// `npm run worker` by hand. Data stays in DATA_DIR for the next start.
//
// Stopping: SIGINT, SIGTERM or SIGHUP at any moment, the start included, stops every piece
// and prints "[stupa] stopped"; signals that follow while it stops are ignored (npm forwards
// the one its group got, so each arrives twice). package.json runs this file with
// `exec node --import tsx`, not the tsx CLI: the CLI relays a signal to its node child, and
// when the child has not reported it back (over tsx's IPC pipe) within 30 ms, sends it again,
// then SIGKILL (strace of the CLI: kill(child, SIGTERM), kill(child, SIGKILL) 35 ms later, in
// 2 of 3 tries), and the servers were left running with parent 1. With `exec`, npm's process
// is this one's parent and exits only after it.
// A supervisor killed anyway (SIGKILL) leaves its pids in DATA_DIR/stack.json, and the next
// start stops what still runs (stack-file.ts); its API and worker stop themselves as soon as
// it is gone (supervised.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { kuboGateway, masterKeyFile } from '../infra/config.js';
import { checkKuboGateway } from '../infra/ipfs/kubo-gateway.js';
import {
  DEFAULT_API_HOST,
  DEFAULT_API_PORT,
  DEFAULT_DATA_DIR,
  DEFAULT_GATEWAY_DOMAIN,
  DEFAULT_GATEWAY_PORT,
  DEFAULT_S3_DOMAIN,
  DEFAULT_S3_PORT,
  DEFAULT_STACK_PORT_BASE,
  READY_CHECK_TIMEOUT_MS,
} from '../infra/constants.js';
import { projectRoot } from '../infra/paths.js';
import { newMasterKey } from '../infra/secrets.js';
import { startEdge, type Edge, type EdgeTls } from './edge.js';
import { DB_SYNC_VALUES, DEFAULT_DB_SYNC, type DbSync } from './db-sync.js';
import { updateStackFile } from './stack-file.js';
import { MAX_PEERS, startStack, TEMPORAL_SHAPES, type Stack, type StackPeer, type TemporalShape } from './stack.js';

const stackOnly = process.argv.includes('--stack-only');
const dataDir = path.resolve(process.env.DATA_DIR || DEFAULT_DATA_DIR);
const portBase = Number(process.env.STACK_PORT_BASE || DEFAULT_STACK_PORT_BASE);

/** STACK_PEERS, STACK_APIS, STACK_WORKERS: how many of each piece; 1 unless set. */
function count(name: string, max: number): number {
  const value = process.env[name] || '1';
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    say(`${name} must be a whole number from 1 to ${max} (it is "${value}")`);
    process.exit(1);
  }
  return n;
}
const shape = { peers: count('STACK_PEERS', MAX_PEERS), apis: count('STACK_APIS', 9), workers: count('STACK_WORKERS', 9) };

/** STACK_DB_SYNC: when the local FerretDB and Temporal fsync their commits (stack/db-sync.ts). */
function dbSync(): DbSync {
  const value = (process.env.STACK_DB_SYNC || DEFAULT_DB_SYNC).toLowerCase();
  if (!(DB_SYNC_VALUES as readonly string[]).includes(value)) {
    say(`STACK_DB_SYNC must be ${DB_SYNC_VALUES.join(' or ')} (it is "${process.env.STACK_DB_SYNC}")`);
    process.exit(1);
  }
  return value as DbSync;
}
const sync = dbSync();

/** STACK_TEMPORAL: dev (the CLI's dev server, the default) or cluster (the production shape). */
function temporalShape(): TemporalShape {
  const value = (process.env.STACK_TEMPORAL || 'dev').toLowerCase();
  if (!(TEMPORAL_SHAPES as readonly string[]).includes(value)) {
    say(`STACK_TEMPORAL must be ${TEMPORAL_SHAPES.join(' or ')} (it is "${process.env.STACK_TEMPORAL}")`);
    process.exit(1);
  }
  return value as TemporalShape;
}
const temporalShapeChosen = temporalShape();

/** EDGE (on unless `off`) and EDGE_TLS (`internal` or `acme`; plain HTTP unless set). */
function edgeSettings(): { on: boolean; tls: EdgeTls['mode'] | null; secret: string } {
  const on = (process.env.EDGE || 'on').toLowerCase();
  const tls = process.env.EDGE_TLS || null;
  if (on !== 'on' && on !== 'off') say(`EDGE must be on or off (it is "${process.env.EDGE}")`);
  if (tls !== null && tls !== 'internal' && tls !== 'acme') say(`EDGE_TLS must be internal or acme (it is "${tls}")`);
  if ((on !== 'on' && on !== 'off') || (tls !== null && tls !== 'internal' && tls !== 'acme')) process.exit(1);
  // A new secret each start: only this start's API processes and edge share it.
  return { on: on === 'on', tls: tls as EdgeTls['mode'] | null, secret: crypto.randomBytes(32).toString('hex') };
}
const edge = edgeSettings();
/** The API process with EDGE_REPORT_PORT takes the edge's reports on API_PORT + this. */
const EDGE_REPORT_PORT_OFFSET = 10;
/** The edge's purge listener (EDGE_PURGE_URLS of the API processes) is on API_PORT + this. */
const EDGE_PURGE_PORT_OFFSET = 11;
/** How often the supervisor checks that the edge still runs. */
const EDGE_WATCH_MS = 1000;
let edgeStop: (() => Promise<void>) | undefined;

const publicPorts = {
  api: Number(process.env.API_PORT || DEFAULT_API_PORT),
  gateway: Number(process.env.GATEWAY_PORT || DEFAULT_GATEWAY_PORT),
  s3: Number(process.env.S3_PORT || DEFAULT_S3_PORT),
};
// With the edge on the public ports, API process n listens on the ports after them.
const shift = edge.on ? 1 : 0;
const ports = (n: number) => ({
  API_PORT: String(publicPorts.api + shift + n),
  GATEWAY_PORT: String(publicPorts.gateway + shift + n),
  S3_PORT: String(publicPorts.s3 + shift + n),
});

/** Refuses a shape whose ports overlap (API_PORT, GATEWAY_PORT and S3_PORT too close together),
 * before anything starts: a process would otherwise fail on EADDRINUSE after the stack is up. */
function assertPortsDistinct(): void {
  const taken = new Map<number, string>();
  const claim = (port: number, what: string) => {
    const other = taken.get(port);
    if (other) {
      say(`port ${port} would be both ${other} and ${what}: leave more room between API_PORT, GATEWAY_PORT and S3_PORT`);
      process.exit(1);
    }
    taken.set(port, what);
  };
  if (edge.on) {
    claim(publicPorts.api, 'the public REST API');
    claim(publicPorts.gateway, 'the public gateway');
    claim(publicPorts.s3, 'the public S3');
    claim(publicPorts.api + EDGE_REPORT_PORT_OFFSET, "the edge's reports");
    claim(publicPorts.api + EDGE_PURGE_PORT_OFFSET, "the edge's purge listener");
  }
  for (let n = 0; n < shape.apis; n++) {
    const p = ports(n);
    claim(Number(p.API_PORT), `API process ${n + 1}'s REST API`);
    claim(Number(p.GATEWAY_PORT), `API process ${n + 1}'s gateway`);
    claim(Number(p.S3_PORT), `API process ${n + 1}'s S3`);
  }
}

/** An address to reach a listener bound to `host` at (every interface: this machine's loopback). */
function reachable(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

function say(line: string): void {
  process.stderr.write(`[stupa] ${line}\n`);
}

/** A development stack keeps its own master key; production sets MASTER_KEY. */
function ensureMasterKey(): void {
  if (process.env.MASTER_KEY || fs.existsSync(masterKeyFile(dataDir))) return;
  fs.writeFileSync(masterKeyFile(dataDir), `${newMasterKey()}\n`, { mode: 0o600 });
  say(`generated a master key in ${masterKeyFile(dataDir)} (set MASTER_KEY in production)`);
}

// The API and worker run in process groups of their own (detached), so a signal to npm's
// group reaches only this process, which stops each once: a second SIGTERM would kill the API
// in the middle of its graceful close, and SIGHUP, which they do not handle, at once. The IPC
// channel tells them when this process is gone (supervised.ts).
function runService(name: string, entry: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(projectRoot, 'stack/supervised.ts'), path.join(projectRoot, entry)], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  child.once('error', (err) => {
    void shutdown(1, `${name} could not start: ${err.message}`);
  });
  child.on('exit', (code, signal) => {
    void shutdown(1, `${name} exited (${signal ?? code})`);
  });
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

let stopping = false;
// Aborting makes a start under way give up: startStack stops what it has started and rejects.
const abort = new AbortController();
let starting: Promise<Stack> | undefined;
const services: ChildProcess[] = [];

async function shutdown(code: number, why: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  const t = Date.now();
  say(`stopping (${why})`);
  abort.abort();
  const stack = await starting?.catch(() => undefined);
  // The entry first: no new request reaches a process that is stopping.
  await edgeStop?.();
  await Promise.all(services.map(stopChild));
  await stack?.stop();
  say(`stopped (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  process.exit(code);
}

// Installed before anything starts, and kept (not once): a signal while stopping must find a
// handler, or its default action would kill this process halfway.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(0, signal));
// A closed terminal (SIGHUP) makes writes to it fail; that must not crash the stop.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
process.on('uncaughtException', (err) => {
  say(`unexpected error: ${err.stack ?? err.message}`);
  void shutdown(1, 'unexpected error');
});

async function main(): Promise<void> {
  if (!stackOnly) assertPortsDistinct();
  fs.mkdirSync(dataDir, { recursive: true });
  ensureMasterKey();
  starting = startStack({
    dataDir,
    ports: { base: portBase },
    ui: true,
    peers: shape.peers,
    dbSync: sync,
    temporal: temporalShapeChosen,
    external: {
      mongodbUri: process.env.MONGODB_URI || undefined,
      temporalAddress: process.env.TEMPORAL_ADDRESS || undefined,
      kuboApiUrl: process.env.KUBO_API_URL || undefined,
      clusterApiUrl: process.env.CLUSTER_API_URL || undefined,
    },
    signal: abort.signal,
  });
  const stack = await starting;
  if (stopping) return; // shutdown() stops it
  const { endpoints } = stack;
  const common: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    MONGODB_URI: endpoints.mongodbUri,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    // The namespace the stack's Temporal is set up with, unless the operator names one.
    ...(process.env.TEMPORAL_NAMESPACE || !endpoints.temporalNamespace ? {} : { TEMPORAL_NAMESPACE: endpoints.temporalNamespace }),
    // The stack stops its edge before its API processes: nothing would route to one that drains.
    SHUTDOWN_DRAIN_MS: process.env.SHUTDOWN_DRAIN_MS || '0',
  };
  // Process n of a kind works with peer n mod STACK_PEERS: it adds content through that Kubo,
  // pins through that Cluster peer, and reads through the other peers' gateways when its own
  // does not have the content.
  const wiring = (n: number): NodeJS.ProcessEnv => {
    const peer: StackPeer | undefined = stack.peers[n % Math.max(1, stack.peers.length)];
    if (!peer) {
      return {
        KUBO_API_URL: endpoints.kuboApiUrl,
        ...(endpoints.kuboGatewayUrl ? { KUBO_GATEWAY_URL: endpoints.kuboGatewayUrl } : {}),
        CLUSTER_API_URL: endpoints.clusterApiUrl,
      };
    }
    const others = stack.peers.filter((p) => p !== peer).map((p) => p.kuboGatewayUrl);
    return {
      KUBO_API_URL: peer.kuboApiUrl,
      KUBO_GATEWAY_URL: peer.kuboGatewayUrl,
      CLUSTER_API_URL: peer.clusterApiUrl,
      ...(others.length > 0 ? { KUBO_PEER_GATEWAY_URLS: others.join(',') } : {}),
    };
  };
  const host = process.env.API_HOST || DEFAULT_API_HOST;
  const apiUrls = Array.from({ length: shape.apis }, (_, n) => `http://${host}:${ports(n).API_PORT}`);
  const apiUrl = process.env.PUBLIC_URL || (edge.on ? `http://${host}:${publicPorts.api}` : apiUrls[0]!);
  const gatewayUrl = process.env.GATEWAY_PUBLIC_URL || `http://${DEFAULT_GATEWAY_DOMAIN}:${publicPorts.gateway}`;
  const s3Url = process.env.S3_PUBLIC_URL || `http://${DEFAULT_S3_DOMAIN}:${publicPorts.s3}`;
  // Behind the edge, the links an API process hands out name the edge.
  const publicEnv: NodeJS.ProcessEnv = edge.on
    ? {
        PUBLIC_URL: apiUrl,
        GATEWAY_PUBLIC_URL: gatewayUrl,
        S3_PUBLIC_URL: s3Url,
        EDGE_SECRET: edge.secret,
        EDGE_PURGE_URLS: `http://${reachable(process.env.EDGE_HOST || host)}:${publicPorts.api + EDGE_PURGE_PORT_OFFSET}`,
      }
    : {};
  const suffix = (kind: string, n: number) => (n === 0 ? kind : `${kind}-${n + 1}`);
  if (!stackOnly) {
    // Reads of content go to Kubo's gateway, not its API: a wrong address would start a
    // service whose every read is 503, so it stops here, by name.
    const first = { ...common, ...wiring(0) };
    const gateway = kuboGateway(first.KUBO_GATEWAY_URL, undefined, first.KUBO_API_URL!);
    await checkKuboGateway(gateway, READY_CHECK_TIMEOUT_MS).catch((err: Error) => {
      throw new Error(`Kubo's gateway: ${err.message}; set KUBO_GATEWAY_URL to the gateway of the Kubo at ${first.KUBO_API_URL}`);
    });
    const started: Record<string, number> = {};
    for (let n = 0; n < shape.workers; n++) {
      const worker = runService(suffix('worker', n), 'workers/main.ts', { ...common, ...wiring(n) });
      services.push(worker);
      started[suffix('worker', n)] = worker.pid ?? -1;
    }
    for (let n = 0; n < shape.apis; n++) {
      const reports = edge.on && n === 0 ? { EDGE_REPORT_PORT: String(publicPorts.api + EDGE_REPORT_PORT_OFFSET) } : {};
      const api = runService(suffix('api', n), 'api/main.ts', { ...common, ...wiring(n), ...ports(n), ...publicEnv, ...reports });
      services.push(api);
      started[suffix('api', n)] = api.pid ?? -1;
    }
    // So that the next start can stop them if this process dies without doing so, and so that
    // operators, tests and the audit find every API process.
    updateStackFile(dataDir, (doc) => {
      doc.services = started;
      doc.apis = apiUrls;
    });
    if (edge.on)
      await runEdge(stack, {
        host,
        publicPorts,
        apiUrl,
        gatewayUrl,
        s3Url,
        upstreams: Array.from({ length: shape.apis }, (_, n) => ports(n)),
      });
  }
  const lines = [
    stackOnly ? 'stack running (no API or worker: npm run api / npm run worker)' : `Stupa is running`,
    ...(stackOnly
      ? []
      : [
          `  REST API      ${apiUrl}   (OpenAPI: ${apiUrl}/openapi.json, readiness: ${apiUrl}/readyz)`,
          ...(edge.on
            ? [
                `  edge          Caddy on the public ports below${edge.tls ? ` (TLS: ${edge.tls})` : ''}; config ${path.join(dataDir, 'edge', 'Caddyfile')}`,
                ...apiUrls.map(
                  (url, n) => `  API process ${n + 1} ${url}   (its gateway and S3 on the ports after the public ones, by ${n + 1})`,
                ),
              ]
            : apiUrls.slice(1).map((url, n) => `  REST API ${n + 2}    ${url}   (its gateway and S3 on the ports after the first's)`)),
          `  Gateway       ${gatewayUrl}   (each account's is a subdomain: gatewayUrl in GET /user/profile)`,
          `  S3            ${s3Url}   (access key id: an API key's keyPrefix; secret: the full key)`,
        ]),
    `  Temporal UI   ${endpoints.temporalUiUrl ?? '(external Temporal: see its own UI)'}`,
    `  Temporal      ${endpoints.temporalAddress}   (namespace ${common.TEMPORAL_NAMESPACE ?? 'default'}${stack.temporalCluster ? '; its own server on PostgreSQL: frontend, 2 history, 2 matching, worker' : ''})`,
    `  MongoDB       ${endpoints.mongodbUri}`,
    ...(stack.peers.length > 1
      ? stack.peers.map((p, n) => `  peer ${n + 1}        Kubo ${p.kuboApiUrl} (gateway ${p.kuboGatewayUrl}), Cluster ${p.clusterApiUrl}`)
      : [`  Kubo API      ${endpoints.kuboApiUrl}`, `  IPFS Cluster  ${endpoints.clusterApiUrl}`]),
    ...(shape.workers > 1 ? [`  workers       ${shape.workers}`] : []),
    `  data          ${dataDir}   (logs in ${path.join(dataDir, 'logs')})`,
    `  started here  ${stack.started.length ? stack.started.join(', ') : 'nothing (all four are external)'}`,
    `first user:     npm run admin -- users create --email you@example.com --name You`,
    `Ctrl-C stops everything.`,
  ];
  say(lines.join('\n         '));
}

/** Starts the edge on the public ports, and starts it again whenever it exits while the service runs. */
async function runEdge(
  stack: Stack,
  plan: {
    host: string;
    publicPorts: { api: number; gateway: number; s3: number };
    apiUrl: string;
    gatewayUrl: string;
    s3Url: string;
    upstreams: { API_PORT: string; GATEWAY_PORT: string; S3_PORT: string }[];
  },
): Promise<void> {
  const { host } = plan;
  const tls: EdgeTls | undefined = edge.tls
    ? {
        mode: edge.tls,
        apiHost: new URL(plan.apiUrl).hostname,
        gatewayDomain: new URL(plan.gatewayUrl).hostname,
        s3Domain: new URL(plan.s3Url).hostname,
        ...(process.env.EDGE_ACME_EMAIL ? { email: process.env.EDGE_ACME_EMAIL } : {}),
      }
    : undefined;
  // Kubo's gateway, where the edge reads content for the API: the stack's peers', or else that of
  // the Kubo the services use (KUBO_GATEWAY_URL, or port 8080 of KUBO_API_URL's host).
  const kuboGateways = (
    stack.peers.length > 0
      ? stack.peers.map((p) => p.kuboGatewayUrl)
      : [kuboGateway(process.env.KUBO_GATEWAY_URL || undefined, stack.endpoints.kuboGatewayUrl, stack.endpoints.kuboApiUrl)]
  ).map((u) => new URL(u).host);
  const options = {
    dataDir,
    host: process.env.EDGE_HOST || host,
    ports: tls
      ? {
          ...plan.publicPorts,
          api: Number(new URL(plan.apiUrl).port || 443),
          ...(process.env.EDGE_HTTP_PORT ? { http: Number(process.env.EDGE_HTTP_PORT) } : {}),
          purge: plan.publicPorts.api + EDGE_PURGE_PORT_OFFSET,
        }
      : { ...plan.publicPorts, purge: plan.publicPorts.api + EDGE_PURGE_PORT_OFFSET },
    apis: plan.upstreams.map((p) => ({ api: `${host}:${p.API_PORT}`, gateway: `${host}:${p.GATEWAY_PORT}`, s3: `${host}:${p.S3_PORT}` })),
    kuboGateways,
    secret: edge.secret,
    reports: `${host}:${plan.publicPorts.api + EDGE_REPORT_PORT_OFFSET}`,
    ...(tls ? { tls } : {}),
    signal: abort.signal,
    onSpawn: (pid: number) => updateStackFile(dataDir, (doc) => void (doc.pids = { ...doc.pids, edge: pid })),
  };
  let current: Edge = await startEdge(options);
  let restarting = false;
  edgeStop = () => current.stop();
  setInterval(() => {
    if (stopping || restarting || current.process.running()) return;
    say(`the edge exited; starting it again (its log: ${current.process.logFile})`);
    restarting = true;
    startEdge(options)
      .then((next) => {
        current = next;
        restarting = false;
      })
      .catch((err: Error) => void shutdown(1, `the edge could not start again: ${err.message}`));
  }, EDGE_WATCH_MS).unref();
}

// An aborted start rejects too; shutdown() already runs then and this call does nothing.
main().catch((err: Error) => void shutdown(1, `failed to start: ${err.message}`));
