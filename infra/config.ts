// Configuration in one module, read from the environment and validated once at start.
// Every variable is in the README's table. A bad or missing value stops the process with
// one message that lists each problem.
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import * as C from './constants.js';
import { ConfigError } from './errors.js';
import { loadPlans, type Plans } from './plans.js';
import { projectRoot } from './paths.js';

export type Dependency = 'mongodb' | 'temporal' | 'kubo' | 'cluster';

export interface Config {
  api: { host: string; port: number; publicUrl: string; jsonBodyLimit: string };
  dataDir: string;
  mongodbUri: string;
  temporal: { address: string; namespace: string; taskQueue: string };
  kubo: { apiUrl: string };
  cluster: { apiUrl: string };
  masterKey: Buffer;
  plans: Plans;
  logLevel: string;
  shutdownTimeoutMs: number;
}

const url = z.url({ protocol: /^https?$/ });
const port = z.coerce.number().int().min(0).max(65535);

const envSchema = z.object({
  API_HOST: z.string().min(1).default(C.DEFAULT_API_HOST),
  API_PORT: port.default(C.DEFAULT_API_PORT),
  PUBLIC_URL: url.optional(),
  JSON_BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)$/i, 'must look like 512kb or 1mb')
    .default(C.DEFAULT_JSON_BODY_LIMIT),
  DATA_DIR: z.string().min(1).default(C.DEFAULT_DATA_DIR),
  MONGODB_URI: z
    .string()
    .regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// or mongodb+srv:// URI')
    .optional(),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:/]+:\d+$/, 'must be host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default(C.DEFAULT_TEMPORAL_NAMESPACE),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default(C.DEFAULT_TASK_QUEUE),
  KUBO_API_URL: url.optional(),
  CLUSTER_API_URL: url.optional(),
  MASTER_KEY: z.string().optional(),
  PLANS_FILE: z.string().min(1).default(path.join(projectRoot, 'infra/plans/variant-a.json')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(C.DEFAULT_SHUTDOWN_TIMEOUT_MS),
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
  mongodbUri?: string;
  temporalAddress?: string;
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

  const config = {
    api: {
      host: e.API_HOST,
      port: e.API_PORT,
      publicUrl: (e.PUBLIC_URL ?? `http://${e.API_HOST}:${e.API_PORT}`).replace(/\/+$/, ''),
      jsonBodyLimit: e.JSON_BODY_LIMIT,
    },
    dataDir,
    mongodbUri: endpoint('mongodb'),
    temporal: { address: endpoint('temporal'), namespace: e.TEMPORAL_NAMESPACE, taskQueue: e.TEMPORAL_TASK_QUEUE },
    kubo: { apiUrl: endpoint('kubo') },
    cluster: { apiUrl: endpoint('cluster') },
    masterKey,
    logLevel: e.LOG_LEVEL,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
  };
  if (problems.length > 0 || !plans) throw new ConfigError(problems);
  return { ...config, plans };
}
