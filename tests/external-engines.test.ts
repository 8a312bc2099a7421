// `npm start` with the engines elsewhere, as production has them (docs/operations/production.md):
// each documented combination starts, with the edge in front, and serves an upload that reads
// back through the edge's REST API and the account's gateway. The engines "elsewhere" are the
// test stack's, which this start must use rather than start its own.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { createUser } from '../core/users.js';
import { openDatabase } from '../infra/db/index.js';
import { loadConfig } from '../infra/config.js';
import { readStackFile } from '../stack/stack-file.js';
import { assertPortsFree } from '../stack/ports.js';
import { databaseUri, stack, tempDir } from './support/stack.js';
import { hostRequest } from './support/host-request.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Started {
  npm: ChildProcess;
  output: () => string;
  dataDir: string;
  env: Record<string, string>;
  api: number;
  gateway: number;
}

/** A free base whose API, gateway and S3 ports (and the processes' behind the edge) are free. */
async function freeBase(): Promise<number> {
  for (;;) {
    const base = 20_000 + crypto.randomInt(0, 110) * 100;
    const offsets = [1, 80, 94, 96, 401, 450, 451, 460, 461, 470, 471, 480, 481];
    try {
      await assertPortsFree(Object.fromEntries(offsets.map((o) => [`port ${o}`, base + o])));
      return base;
    } catch {
      // taken: another base
    }
  }
}

async function npmStart(external: Record<string, string>): Promise<Started> {
  const base = await freeBase();
  const dataDir = tempDir('stupa-ext-');
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    STACK_PORT_BASE: String(base),
    API_HOST: '127.0.0.1',
    API_PORT: String(base + 450),
    GATEWAY_PORT: String(base + 470),
    S3_PORT: String(base + 480),
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
    // A queue of its own: its worker must not take the test stack's other workflows.
    TEMPORAL_TASK_QUEUE: `ext-${crypto.randomUUID()}`,
    ...external,
  };
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('STUPA_TEST_') && !/^(MONGODB_URI|TEMPORAL_|KUBO_|CLUSTER_API_URL|MASTER_KEY|EDGE)/.test(k),
    ),
  );
  const npm = spawn('npm', ['start'], { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...inherited, ...env } });
  let output = '';
  npm.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  npm.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const started = { npm, output: () => output, dataDir, env, api: base + 450, gateway: base + 470 };
  for (const deadline = Date.now() + 180_000; !output.includes('Stupa is running'); await sleep(200)) {
    if (npm.exitCode !== null || Date.now() > deadline) {
      await stop(started);
      throw new Error(`npm start did not come up:\n${output}`);
    }
  }
  return started;
}

async function stop(run: Started): Promise<void> {
  if (run.npm.exitCode !== null) return;
  const exited = new Promise((r) => run.npm.once('exit', r));
  process.kill(-run.npm.pid!, 'SIGTERM');
  await exited;
}

/** Through the edge: a user, an upload, the file back from the REST API and from the account's gateway. */
async function serves(run: Started, mongodbUri: string): Promise<void> {
  // "Stupa is running" is printed once the processes are spawned; they get ready soon after.
  let ready = { status: 0, body: '' };
  for (const deadline = Date.now() + 90_000; ready.status !== 200 && Date.now() < deadline; await sleep(250)) {
    const res = await fetch(`http://127.0.0.1:${run.api}/readyz`).catch(() => undefined);
    ready = { status: res?.status ?? 0, body: (await res?.text()) ?? '' };
  }
  expect(ready).toMatchObject({ status: 200 });
  const config = loadConfig({ ...run.env, MONGODB_URI: mongodbUri });
  const db = await openDatabase(mongodbUri);
  let apiKey: string;
  try {
    ({ apiKey } = await createUser({ db, config }, { email: `ext-${Date.now()}@example.test`, name: 'Ext' }));
  } finally {
    await db.close();
  }
  const content = `elsewhere ${crypto.randomUUID()}`;
  const auth = { authorization: `Bearer ${apiKey}` };
  const upload = await fetch(`http://127.0.0.1:${run.api}/upload/new`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ content, name: 'a.txt' }),
  });
  expect(upload.status).toBe(201);
  const { cid } = (await upload.json()) as { cid: string };
  const profile = (await (await fetch(`http://127.0.0.1:${run.api}/user/profile`, { headers: auth })).json()) as { gatewayUrl: string };
  const read = await hostRequest(run.gateway, new URL(profile.gatewayUrl).host, `/ipfs/${cid}`);
  expect(read.status).toBe(200);
  expect(read.body.toString()).toBe(content);
}

test("all four engines elsewhere, and Kubo's gateway named: starts nothing of its own, with the edge", async () => {
  const mongodbUri = databaseUri('ext_all');
  const run = await npmStart({
    MONGODB_URI: mongodbUri,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    KUBO_API_URL: stack.kuboApiUrl,
    KUBO_GATEWAY_URL: process.env.STUPA_TEST_KUBO_GATEWAY_URL!,
    CLUSTER_API_URL: stack.clusterApiUrl,
  });
  try {
    expect(run.output()).toContain('started here  nothing (all four are external)');
    expect(readStackFile(run.dataDir)?.pids ?? {}).not.toHaveProperty('kubo');
    await serves(run, mongodbUri);
  } finally {
    await stop(run);
  }
}, 300_000);

test('MongoDB and Temporal elsewhere, Kubo and Cluster started here: with the edge', async () => {
  const mongodbUri = databaseUri('ext_db');
  const run = await npmStart({ MONGODB_URI: mongodbUri, TEMPORAL_ADDRESS: stack.temporalAddress });
  try {
    expect(run.output()).toMatch(/started here +kubo, cluster/);
    await serves(run, mongodbUri);
  } finally {
    await stop(run);
  }
}, 300_000);

test('Kubo elsewhere without its gateway named: the start stops at once and says which variable to set', async () => {
  const run = spawn('npm', ['start'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      DATA_DIR: tempDir('stupa-ext-'),
      STACK_PORT_BASE: String(await freeBase()),
      MONGODB_URI: databaseUri('ext_nogw'),
      TEMPORAL_ADDRESS: stack.temporalAddress,
      KUBO_API_URL: stack.kuboApiUrl,
      KUBO_GATEWAY_URL: '',
      CLUSTER_API_URL: stack.clusterApiUrl,
      MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    },
  });
  let output = '';
  run.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  run.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise((r) => run.once('exit', r));
  expect(code).not.toBe(0);
  expect(output).toContain('set KUBO_GATEWAY_URL to the gateway of the Kubo at');
  expect(output).not.toContain('Invalid URL');
}, 120_000);
