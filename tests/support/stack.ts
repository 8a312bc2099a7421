// What tests share: the endpoints of the isolated stack that `npm test` started
// (stack/run-tests.ts passes them as STUPA_TEST_*), an API built on them in-process on
// an ephemeral port, and users with keys.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApiKey } from '../../core/apikeys.js';
import { startApiServer, type ApiServer } from '../../api/server.js';
import { loadConfig, type Config } from '../../infra/config.js';
import { createLogger } from '../../infra/logger.js';

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with npm test, which starts the test stack`);
  return value;
}

export const stack = {
  get mongodbUri() {
    return need('STUPA_TEST_MONGODB_URI');
  },
  get temporalAddress() {
    return need('STUPA_TEST_TEMPORAL_ADDRESS');
  },
  get kuboApiUrl() {
    return need('STUPA_TEST_KUBO_API_URL');
  },
  get clusterApiUrl() {
    return need('STUPA_TEST_CLUSTER_API_URL');
  },
};

/** The test stack's MongoDB with a database of its own (`<label>_<time>`), for a test whose
 * records must not meet the other files' (or whose sweep must not see theirs). */
export function databaseUri(label: string): string {
  return stack.mongodbUri.replace(/^(mongodb(?:\+srv)?:\/\/[^/?]+)(\/[^?]*)?/, `$1/${label}_${Date.now()}`);
}

export function tempDir(prefix = 'stupa-t-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** The environment of a service process wired to the test stack. */
export function testEnv(overrides: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    MONGODB_URI: stack.mongodbUri,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    KUBO_API_URL: stack.kuboApiUrl,
    KUBO_GATEWAY_URL: need('STUPA_TEST_KUBO_GATEWAY_URL'),
    GATEWAY_PORT: '0',
    S3_PORT: '0',
    CLUSTER_API_URL: stack.clusterApiUrl,
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    DATA_DIR: tempDir(),
    API_HOST: '127.0.0.1',
    API_PORT: '0',
    LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent',
    SHUTDOWN_TIMEOUT_MS: '1000',
    ...overrides,
  };
}

export function testConfig(overrides: Record<string, string | undefined> = {}): Config {
  return loadConfig(testEnv(overrides));
}

export async function startTestApi(overrides: Record<string, string | undefined> = {}): Promise<ApiServer> {
  const config = testConfig(overrides);
  return startApiServer(config, createLogger(config.logLevel));
}

/** Writes a plans file: the shipped variant A with `changes` merged into each named plan. */
export function plansFile(changes: Record<string, Record<string, number>>): string {
  const base = JSON.parse(fs.readFileSync(path.join(process.cwd(), 'infra/plans/variant-a.json'), 'utf8'));
  for (const [name, limits] of Object.entries(changes)) base.plans[name] = { ...(base.plans[name] ?? base.plans.dharma), ...limits };
  const file = path.join(tempDir(), 'plans.json');
  fs.writeFileSync(file, JSON.stringify(base));
  return file;
}

export interface TestUser {
  userId: string;
  apiKey: string;
  keyPrefix: string;
}

export async function createUser(api: ApiServer, plan = 'dharma'): Promise<TestUser> {
  const { db, config } = api.deps;
  const user = await db.users.create({ email: `${crypto.randomUUID()}@example.test`, name: 'Test User', plan });
  if (!user) throw new Error('email collision');
  const key = await createApiKey({ db, config }, { userId: user._id, maxKeys: config.plans.get(plan).apiKeys });
  return { userId: user._id, apiKey: key.apiKey, keyPrefix: key.keyPrefix };
}

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** One HTTP call to the API; `body` objects are sent as JSON, strings and buffers as they are. */
export async function call<T = any>(
  api: ApiServer | string,
  method: string,
  urlPath: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...(options.key ? { 'X-Api-Key': options.key } : {}), ...options.headers };
  let body: RequestInit['body'];
  if (typeof options.body === 'string' || options.body instanceof Uint8Array) body = options.body as RequestInit['body'];
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const base = typeof api === 'string' ? api : api.url;
  const res = await fetch(`${base}${urlPath}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: tests that expect JSON fail on the body's shape
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

/** Asserts the shared error shape and returns its reason. */
export function errorReason(reply: Reply): string {
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  expect(reply.body.error).toEqual({ reason: expect.stringMatching(/^[A-Z][A-Z0-9_]*$/), details: expect.any(String) });
  expect(reply.text).not.toMatch(/\n\s+at /);
  return reply.body.error.reason;
}

/** The user's newest file record of the content (by its multihash), or null. */
export async function newestFile(api: ApiServer, userId: string, multihash: string) {
  return (await api.deps.db.files.ofContent(userId, multihash, 1))[0] ?? null;
}
