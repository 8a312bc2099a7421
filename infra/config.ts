// Configuration in one module, read from the environment and validated once at start.
// Every variable is in docs/operations/configuration.md. A bad or missing value stops the process with
// one message that lists each problem.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import * as C from './constants.js';
import { ConfigError } from './errors.js';
import { loadPlans, type Plans } from './plans.js';
import { defaultBuildId } from './build-id.js';
import { projectRoot } from './paths.js';

export type Dependency = 'mongodb' | 'temporal' | 'kubo' | 'cluster';

export interface Config {
  /** `publicUrl`: where clients reach the API (PUBLIC_URL); null until the server knows its own address. */
  api: { host: string; port: number; publicUrl: string | null; jsonBodyLimit: string };
  dataDir: string;
  mongodbUri: string;
  /** How to reach Temporal. `tls` when TLS is on (its files read once, here); `apiKey` when set. */
  temporal: { address: string; namespace: string; taskQueue: string; workflowBundle?: string; tls?: TemporalTls; apiKey?: string };
  /** What the worker does about the namespace and search attributes at start (TEMPORAL_SETUP:
   * `auto` sets up what is missing, `off` only checks) and the retention of a namespace it
   * registers. Apart from `temporal`: only the worker and `admin temporal setup` use it. */
  temporalSetup: { mode: 'auto' | 'off'; retentionDays: number };
  /** Temporal's Worker Deployment Versioning (workers/versioning.ts): the deployment and build the
   * worker polls as, and whether it makes its build the current one when it starts (`auto`) or an
   * operator does (`manual`: npm run admin -- temporal promote). Null with WORKER_VERSIONING=off. */
  workerVersion: { deploymentName: string; buildId: string; promote: 'auto' | 'manual' } | null;
  /** `gatewayUrl`: Kubo's own HTTP gateway, which the service's gateway reads from (never exposed);
   * `peerGatewayUrls`: the other Cluster peers' Kubo gateways, read in turn when this one does not
   * have the content (it is allocated elsewhere) or is down. */
  kubo: { apiUrl: string; gatewayUrl: string; peerGatewayUrls: string[] };
  /** `allocateLocal`: content this process added is allocated to its Cluster peer first (the
   * peer of CLUSTER_API_URL drives the Kubo of KUBO_API_URL; false when both are load-balanced). */
  cluster: { apiUrl: string; replicationMin: number; replicationMax: number; allocateLocal: boolean };
  /** `delegates`: multiaddrs (each ending in /p2p/<peer>) given to pinning clients; empty: Kubo's own. */
  pins: { timeoutMs: number; delegates: string[] };
  ipns: { republishEveryMs: number };
  uploads: { jsonLimit: string };
  /** GATEWAY_URL: where links to content point (`uris.gateway` of uploads, /image's redirects)
   * when they should name a public gateway; null: each account's own gateway. */
  gatewayUrl: string | null;
  /** The service's gateway: its port, and its public address, whose host's subdomains are
   * accounts' gateways (`https://gw.example.com` → `https://<slug>.gw.example.com`); without
   * GATEWAY_PUBLIC_URL, `http://localhost:<port it listens on>`, known once it listens. */
  gateway: { port: number; publicUrl: string | null; domain: string };
  /** The edge in front of the service (stack/edge.ts): `secret` authenticates its access
   * decisions (`GET /_edge/gateway` on the gateway port answers only requests carrying it);
   * `reportPort`, when set, is where this process takes the edge's access log (bytes served),
   * which it meters. Both null without an edge. `purgeUrls`: every edge's purge listener, told
   * when an account's access rules change (edge/purge.ts). */
  edge: { secret: string | null; reportPort: number | null; purgeUrls: string[] };
  /** GET /image/:cid: derivatives cached in `cacheDir` up to `cacheBytes`; sources up to
   * `maxSourceBytes` and `maxPixels`; `concurrency` transforms at once, `queue` more waiting. */
  /** The S3 interface: its port; the domain whose subdomains are buckets (virtual-host style,
   * `<bucket>.<domain>`); its public address (null until it listens, without S3_PUBLIC_URL);
   * the region it names; how long an untouched multipart upload is kept; whether object answers
   * carry the CID as user metadata (`x-amz-meta-cid`, as Filebase does) beside `x-ipfs-path`. */
  s3: { port: number; domain: string; publicUrl: string | null; region: string; multipartMaxAgeMs: number; metaCid: boolean };
  /** Webhooks: whether endpoints may be plain HTTP and on private, loopback or link-local
   * addresses (WEBHOOK_ALLOW_PRIVATE, for tests and closed networks), and how long a delivery is
   * retried and an endpoint may fail before it is paused (WEBHOOK_RETRY_PERIOD). */
  webhooks: { allowPrivate: boolean; retryPeriodMs: number };
  images: { cacheDir: string; cacheBytes: number; maxSourceBytes: number; maxPixels: number; concurrency: number; queue: number };
  masterKey: Buffer;
  plans: Plans;
  logLevel: string;
  /** `pretty` lines when stdout is a terminal, JSON lines otherwise; LOG_FORMAT decides when set. */
  logFormat: 'json' | 'pretty';
  shutdownTimeoutMs: number;
  /** On SIGTERM, how long the API keeps serving, marked not ready, before it stops listening. */
  shutdownDrainMs: number;
  /** The share of its time a background data migration works (0 < pace <= 1). */
  migrationPace: number;
}

/** TLS to Temporal: `serverName` overrides the name the server's certificate is checked
 * against, `ca` is the CA that signed it (else the system's), `clientCert` is for mTLS. */
export interface TemporalTls {
  serverName?: string;
  ca?: Buffer;
  clientCert?: { crt: Buffer; key: Buffer };
}

const url = z.url({ protocol: /^https?$/ });
/** URLs, comma-separated; a trailing slash is dropped. */
const urlList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((a) => a.trim().replace(/\/+$/, ''))
      .filter(Boolean),
  )
  .pipe(z.array(url).max(100));
const bodyLimit = z.string().regex(/^\d+(b|kb|mb)$/i, 'must look like 512kb or 1mb');
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** `500ms`, `30s`, `5m`, `24h`, `7d`, or a bare number of milliseconds. */
const duration = z
  .string()
  .regex(/^\d+(ms|s|m|h|d)?$/, 'must be a duration like 30s, 5m or 24h')
  .transform((v) => {
    const [, n, unit] = /^(\d+)(ms|s|m|h|d)?$/.exec(v)!;
    return Number(n) * UNITS[unit ?? 'ms']!;
  });
const replication = z.coerce.number().int().min(-1).max(1000);
const port = z.coerce.number().int().min(0).max(65535);

const envSchema = z.object({
  API_HOST: z.string().min(1).default(C.DEFAULT_API_HOST),
  API_PORT: port.default(C.DEFAULT_API_PORT),
  PUBLIC_URL: url.optional(),
  JSON_BODY_LIMIT: bodyLimit.default(C.DEFAULT_JSON_BODY_LIMIT),
  UPLOAD_JSON_LIMIT: bodyLimit.default(C.DEFAULT_UPLOAD_JSON_LIMIT),
  PIN_TIMEOUT: duration.prefault(C.DEFAULT_PIN_TIMEOUT),
  PIN_DELEGATES: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((a) => a.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^\/.+\/p2p\/[^/]+$/, 'each address must be a multiaddr ending in /p2p/<peer id>')).max(20))
    .optional(),
  IPNS_REPUBLISH_INTERVAL: duration.prefault(C.DEFAULT_IPNS_REPUBLISH_INTERVAL),
  CLUSTER_REPLICATION_MIN: replication.default(-1),
  CLUSTER_REPLICATION_MAX: replication.default(-1),
  CLUSTER_ALLOCATE_LOCAL: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  GATEWAY_URL: url.optional(),
  GATEWAY_PORT: port.default(C.DEFAULT_GATEWAY_PORT),
  GATEWAY_PUBLIC_URL: url.optional(),
  S3_PORT: port.default(C.DEFAULT_S3_PORT),
  EDGE_SECRET: z.string().min(32, 'must be at least 32 characters (npm start makes one per start)').optional(),
  EDGE_REPORT_PORT: port.optional(),
  EDGE_PURGE_URLS: urlList.optional(),
  S3_PUBLIC_URL: url.optional(),
  S3_DOMAIN: z.string().min(1).optional(),
  S3_REGION: z
    .string()
    .regex(/^[a-z0-9-]{1,32}$/, 'must look like us-east-1')
    .default(C.DEFAULT_S3_REGION),
  S3_MULTIPART_MAX_AGE: duration.prefault(C.DEFAULT_S3_MULTIPART_MAX_AGE),
  S3_META_CID: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  WEBHOOK_ALLOW_PRIVATE: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  WEBHOOK_RETRY_PERIOD: duration.prefault(C.DEFAULT_WEBHOOK_RETRY_PERIOD),
  DATA_DIR: z.string().min(1).default(C.DEFAULT_DATA_DIR),
  MONGODB_URI: z
    .string()
    .regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// or mongodb+srv:// URI')
    .optional(),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:/]+:\d+$/, 'must be host:port')
    .optional(),
  // Unset: the running local stack's namespace, else DEFAULT_TEMPORAL_NAMESPACE.
  TEMPORAL_NAMESPACE: z.string().min(1).max(255).optional(),
  TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
  TEMPORAL_TLS_CA_FILE: z.string().min(1).optional(),
  TEMPORAL_TLS_CERT_FILE: z.string().min(1).optional(),
  TEMPORAL_TLS_KEY_FILE: z.string().min(1).optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
  // Sent as a header: a stray space or line break (a key pasted from a file) would break it.
  TEMPORAL_API_KEY: z.string().regex(/^\S+$/, 'must not contain spaces or line breaks').optional(),
  TEMPORAL_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(C.DEFAULT_TEMPORAL_RETENTION_DAYS),
  TEMPORAL_SETUP: z.enum(['auto', 'off']).default(C.DEFAULT_TEMPORAL_SETUP),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default(C.DEFAULT_TASK_QUEUE),
  WORKER_VERSIONING: z.enum(['on', 'off']).default('on'),
  WORKER_DEPLOYMENT_NAME: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, 'letters, digits, - and _')
    .default(C.DEFAULT_WORKER_DEPLOYMENT),
  // Temporal refuses a build id with a '.' only as a deployment name's part: ids like 1.2.3+abc are fine.
  WORKER_BUILD_ID: z
    .string()
    .regex(/^\S{1,200}$/, 'at most 200 characters, no spaces')
    .optional(),
  WORKER_PROMOTE: z.enum(['auto', 'manual']).default('auto'),
  WORKFLOW_BUNDLE: z.string().min(1).optional(),
  KUBO_API_URL: url.optional(),
  KUBO_GATEWAY_URL: url.optional(),
  KUBO_PEER_GATEWAY_URLS: urlList.optional(),
  CLUSTER_API_URL: url.optional(),
  MASTER_KEY: z.string().optional(),
  PLANS_FILE: z.string().min(1).default(path.join(projectRoot, 'infra/plans/variant-a.json')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(C.DEFAULT_SHUTDOWN_TIMEOUT_MS),
  SHUTDOWN_DRAIN_MS: z.coerce.number().int().min(0).max(600_000).default(C.DEFAULT_SHUTDOWN_DRAIN_MS),
  MIGRATION_PACE: z.coerce.number().gt(0).max(1).default(C.DEFAULT_MIGRATION_PACE),
  // Megabytes may be fractional (a test's tiny cache); 0 turns the image cache off.
  IMAGE_CACHE_MB: z.coerce.number().min(0).default(C.DEFAULT_IMAGE_CACHE_MB),
  IMAGE_MAX_SOURCE_MB: z.coerce.number().positive().default(C.DEFAULT_IMAGE_MAX_SOURCE_MB),
  IMAGE_MAX_PIXELS: z.coerce.number().int().min(1).default(C.DEFAULT_IMAGE_MAX_PIXELS),
  IMAGE_CONCURRENCY: z.coerce.number().int().min(1).max(1024).optional(),
  IMAGE_QUEUE: z.coerce.number().int().min(0).default(C.DEFAULT_IMAGE_QUEUE),
});

const endpointVariables: Record<Dependency, keyof StackEndpoints> = {
  mongodb: 'mongodbUri',
  temporal: 'temporalAddress',
  kubo: 'kuboApiUrl',
  cluster: 'clusterApiUrl',
};
const envNames: Record<Dependency, string> = {
  mongodb: 'MONGODB_URI',
  temporal: 'TEMPORAL_ADDRESS',
  kubo: 'KUBO_API_URL',
  cluster: 'CLUSTER_API_URL',
};

interface StackEndpoints {
  kuboGatewayUrl?: string;
  mongodbUri?: string;
  temporalAddress?: string;
  /** The namespace the local stack's Temporal was set up with. */
  temporalNamespace?: string;
  kuboApiUrl?: string;
  clusterApiUrl?: string;
}

/** The endpoints of a local stack that `npm start` runs with this DATA_DIR, if one runs. */
function stackEndpoints(dataDir: string): StackEndpoints {
  try {
    const doc = JSON.parse(fs.readFileSync(path.join(dataDir, 'stack.json'), 'utf8')) as { endpoints?: StackEndpoints };
    return doc.endpoints ?? {};
  } catch {
    return {};
  }
}

/** The gateway's public address: GATEWAY_PUBLIC_URL, or else `localhost` (browsers and curl
 * send `<slug>.localhost` to loopback without any DNS). */
function gatewaySettings(port: number, publicUrl: string | undefined): Config['gateway'] {
  if (!publicUrl) return { port, publicUrl: null, domain: C.DEFAULT_GATEWAY_DOMAIN };
  const base = new URL(publicUrl);
  return { port, publicUrl: base.origin, domain: base.hostname };
}

/** KUBO_GATEWAY_URL, the local stack's Kubo gateway, or else Kubo's default gateway port (8080)
 * on KUBO_API_URL's host. */
export function kuboGateway(given: string | undefined, stacks: string | undefined, apiUrl: string): string {
  if (given ?? stacks) return (given ?? stacks)!.replace(/\/+$/, '');
  if (!apiUrl) return '';
  const url = new URL(apiUrl);
  url.port = '8080';
  return url.origin;
}

type Env = z.infer<typeof envSchema>;

/** A PEM file read once, at load: one named by a variable that is missing or unreadable is a problem. */
function pemFile(variable: string, file: string | undefined, problems: string[]): Buffer | undefined {
  if (!file) return undefined;
  try {
    const pem = fs.readFileSync(file);
    if (!pem.includes('-----BEGIN ')) problems.push(`${variable}: ${file} is not a PEM file (it has no -----BEGIN line)`);
    return pem;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    problems.push(`${variable}: ${file} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? (err as Error).message})`}`);
    return undefined;
  }
}

/**
 * TLS to Temporal: on with TEMPORAL_TLS=true, with any of the TLS variables, or with an API key
 * (Temporal Cloud takes keys only over TLS). TEMPORAL_TLS=false with an API key is plain text
 * (a local proxy that adds TLS); with a TLS variable it is a contradiction.
 */
function temporalTls(e: Env, problems: string[]): TemporalTls | undefined {
  const tlsVariables = ['TEMPORAL_TLS_CA_FILE', 'TEMPORAL_TLS_CERT_FILE', 'TEMPORAL_TLS_KEY_FILE', 'TEMPORAL_TLS_SERVER_NAME'] as const;
  const set = tlsVariables.filter((name) => e[name] !== undefined);
  if (e.TEMPORAL_TLS === 'false') {
    if (set.length > 0) problems.push(`TEMPORAL_TLS is false, but ${set.join(', ')} ${set.length > 1 ? 'are' : 'is'} set`);
    return undefined;
  }
  if (e.TEMPORAL_TLS !== 'true' && set.length === 0 && !e.TEMPORAL_API_KEY) return undefined;
  if (Boolean(e.TEMPORAL_TLS_CERT_FILE) !== Boolean(e.TEMPORAL_TLS_KEY_FILE)) {
    problems.push('TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE are the client certificate and its key (mTLS): set both or neither');
  }
  const ca = pemFile('TEMPORAL_TLS_CA_FILE', e.TEMPORAL_TLS_CA_FILE, problems);
  const crt = pemFile('TEMPORAL_TLS_CERT_FILE', e.TEMPORAL_TLS_CERT_FILE, problems);
  const key = pemFile('TEMPORAL_TLS_KEY_FILE', e.TEMPORAL_TLS_KEY_FILE, problems);
  return {
    ...(e.TEMPORAL_TLS_SERVER_NAME ? { serverName: e.TEMPORAL_TLS_SERVER_NAME } : {}),
    ...(ca ? { ca } : {}),
    ...(crt && key ? { clientCert: { crt, key } } : {}),
  };
}

export const masterKeyFile = (dataDir: string): string => path.join(dataDir, 'master.key');

function parseMasterKey(value: string, source: string, problems: string[]): Buffer {
  const text = value.trim();
  const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) problems.push(`${source} must be 32 bytes, as 64 hex characters or base64`);
  return key;
}

/**
 * Reads and validates the configuration. `needs` names the dependencies this process uses:
 * each must have a URL, from its variable or else from the running local stack of DATA_DIR
 * (DATA_DIR/stack.json, written by `npm start`).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, needs: Dependency[] = ['mongodb', 'temporal', 'kubo', 'cluster']): Config {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`));
  }
  const e = parsed.data;
  const problems: string[] = [];
  const dataDir = path.resolve(e.DATA_DIR);
  const stack = stackEndpoints(dataDir);
  const endpoint = (dep: Dependency): string => {
    const value = (e[envNames[dep] as keyof typeof e] as string | undefined) ?? stack[endpointVariables[dep]];
    if (!value && needs.includes(dep)) {
      problems.push(`${envNames[dep]} is not set and no local stack runs with DATA_DIR=${dataDir} (start one with npm start)`);
    }
    return (value ?? '').replace(/\/+$/, '');
  };

  if (e.WORKFLOW_BUNDLE && !fs.existsSync(e.WORKFLOW_BUNDLE))
    problems.push(`WORKFLOW_BUNDLE: ${e.WORKFLOW_BUNDLE} does not exist (npm run build writes dist/workflow-bundle.js)`);
  if (e.CLUSTER_REPLICATION_MAX !== -1 && e.CLUSTER_REPLICATION_MIN > e.CLUSTER_REPLICATION_MAX) {
    problems.push('CLUSTER_REPLICATION_MIN must not exceed CLUSTER_REPLICATION_MAX');
  }

  let masterKey: Buffer = Buffer.alloc(0);
  if (e.MASTER_KEY) masterKey = parseMasterKey(e.MASTER_KEY, 'MASTER_KEY', problems);
  else if (fs.existsSync(masterKeyFile(dataDir))) {
    masterKey = parseMasterKey(fs.readFileSync(masterKeyFile(dataDir), 'utf8'), masterKeyFile(dataDir), problems);
  } else if (needs.includes('mongodb')) {
    problems.push(`MASTER_KEY is not set and ${masterKeyFile(dataDir)} does not exist (npm start creates it for development)`);
  }

  let plans: Plans | undefined;
  try {
    plans = loadPlans(e.PLANS_FILE);
  } catch (err) {
    problems.push(...((err as ConfigError).problems ?? [(err as Error).message]));
  }

  const kuboApiUrl = endpoint('kubo');
  const temporalTlsConfig = temporalTls(e, problems);
  const config = {
    api: {
      host: e.API_HOST,
      port: e.API_PORT,
      publicUrl: e.PUBLIC_URL ? e.PUBLIC_URL.replace(/\/+$/, '') : null,
      jsonBodyLimit: e.JSON_BODY_LIMIT,
    },
    dataDir,
    mongodbUri: endpoint('mongodb'),
    temporal: {
      address: endpoint('temporal'),
      namespace: e.TEMPORAL_NAMESPACE ?? stack.temporalNamespace ?? C.DEFAULT_TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      ...(e.WORKFLOW_BUNDLE ? { workflowBundle: path.resolve(e.WORKFLOW_BUNDLE) } : {}),
      ...(temporalTlsConfig ? { tls: temporalTlsConfig } : {}),
      ...(e.TEMPORAL_API_KEY ? { apiKey: e.TEMPORAL_API_KEY } : {}),
    },
    temporalSetup: { mode: e.TEMPORAL_SETUP, retentionDays: e.TEMPORAL_RETENTION_DAYS },
    workerVersion:
      e.WORKER_VERSIONING === 'off'
        ? null
        : { deploymentName: e.WORKER_DEPLOYMENT_NAME, buildId: e.WORKER_BUILD_ID ?? defaultBuildId(), promote: e.WORKER_PROMOTE },
    kubo: {
      apiUrl: kuboApiUrl,
      gatewayUrl: kuboGateway(e.KUBO_GATEWAY_URL, stack.kuboGatewayUrl, kuboApiUrl),
      peerGatewayUrls: e.KUBO_PEER_GATEWAY_URLS ?? [],
    },
    cluster: {
      apiUrl: endpoint('cluster'),
      replicationMin: e.CLUSTER_REPLICATION_MIN,
      replicationMax: e.CLUSTER_REPLICATION_MAX,
      allocateLocal: e.CLUSTER_ALLOCATE_LOCAL,
    },
    pins: { timeoutMs: e.PIN_TIMEOUT, delegates: e.PIN_DELEGATES ?? [] },
    ipns: { republishEveryMs: Math.max(1000, e.IPNS_REPUBLISH_INTERVAL) },
    uploads: { jsonLimit: e.UPLOAD_JSON_LIMIT },
    gatewayUrl: e.GATEWAY_URL ? e.GATEWAY_URL.replace(/\/+$/, '') : null,
    gateway: gatewaySettings(e.GATEWAY_PORT, e.GATEWAY_PUBLIC_URL),
    edge: { secret: e.EDGE_SECRET ?? null, reportPort: e.EDGE_REPORT_PORT ?? null, purgeUrls: e.EDGE_PURGE_URLS ?? [] },
    s3: {
      port: e.S3_PORT,
      publicUrl: e.S3_PUBLIC_URL ? new URL(e.S3_PUBLIC_URL).origin : null,
      domain: e.S3_DOMAIN ?? (e.S3_PUBLIC_URL ? new URL(e.S3_PUBLIC_URL).hostname : C.DEFAULT_S3_DOMAIN),
      region: e.S3_REGION,
      multipartMaxAgeMs: Math.max(60_000, e.S3_MULTIPART_MAX_AGE),
      metaCid: e.S3_META_CID,
    },
    webhooks: { allowPrivate: e.WEBHOOK_ALLOW_PRIVATE, retryPeriodMs: Math.max(1000, e.WEBHOOK_RETRY_PERIOD) },
    images: {
      cacheDir: path.join(dataDir, 'image-cache'),
      cacheBytes: Math.floor(e.IMAGE_CACHE_MB * 2 ** 20),
      maxSourceBytes: Math.floor(e.IMAGE_MAX_SOURCE_MB * 2 ** 20),
      maxPixels: e.IMAGE_MAX_PIXELS,
      // A transform is CPU work on a libuv thread: one per core keeps the cores busy, no more.
      concurrency: e.IMAGE_CONCURRENCY ?? os.availableParallelism(),
      queue: e.IMAGE_QUEUE,
    },
    masterKey,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json'),
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS,
    migrationPace: e.MIGRATION_PACE,
  };
  if (problems.length > 0 || !plans) throw new ConfigError(problems);
  return { ...config, plans };
}
