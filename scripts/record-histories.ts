// `npm run record-histories`: records the event histories that tests/unit/replay.test.ts replays
// against today's workflow code. It starts a stack of its own (scripts/chaos/engines.ts, the dev
// server), drives the service through real runs that take each workflow down its branches, and
// writes every history to tests/histories/<workflowType>/<name>.json:
//   pinWorkflow           a pin that waits for an offline origin, then succeeds; one that times out
//   syncCidWorkflow       unpins across users while the Cluster peer is down, completed once it is back
//   snapshotWorkflow      a folder with a subfolder
//   ipnsNameWorkflow      a publish, republish rounds on a short interval, then the name deleted
//   multipartWorkflow     an S3 multipart upload completed
//   multipartCleanupWorkflow, sweepWorkflow  their schedules triggered
//   auditWorkflow         an audit run on demand
//   webhookWorkflow       deliveries to a receiver that fails twice, then answers
// Re-record when a workflow changes on purpose (docs/architecture/workflows.md, "Changing a
// workflow"); the histories of the old code stay, so both are replayed.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { createUser } from '../core/users.js';
import { loadConfig } from '../infra/config.js';
import { openDatabase } from '../infra/db/index.js';
import { projectRoot } from '../infra/paths.js';
import { auditJob } from '../infra/temporal/contracts/audit.js';
import { multipartCleanupJob } from '../infra/temporal/contracts/multipart.js';
import { sweepJob } from '../infra/temporal/contracts/sweep.js';
import { binaryPath } from '../stack/binaries.js';
import { startChaosStack, type ChaosStack } from './chaos/engines.js';
import { createS3Load } from './chaos/s3.js';

const execFileAsync = promisify(execFile);
const HISTORIES_DIR = path.join(projectRoot, 'tests', 'histories');
/** Histories kept per workflow type: the most varied (by status) first. */
const PER_TYPE = 4;

const say = (line: string) => process.stderr.write(`[record] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 90_000): Promise<T> {
  for (const deadline = Date.now() + timeoutMs; ; await sleep(300)) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms (last: ${JSON.stringify(v)})`);
  }
}

/** A receiver on loopback answering 500 to its first two requests, then 200. */
function flakyReceiver() {
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = ++n <= 2 ? 500 : 200;
      res.end();
    });
  });
  return {
    count: () => n,
    listen: () => new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port))),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function drive(stack: ChaosStack): Promise<void> {
  const config = loadConfig(stack.env);
  const db = await openDatabase(config.mongodbUri);
  const users = [];
  for (const name of ['a', 'b']) {
    users.push(await createUser({ db, config }, { email: `record-${name}-${Date.now()}@example.test`, name, plan: 'nirvana' }));
  }
  await db.close();
  const [a, b] = users as [(typeof users)[0], (typeof users)[0]];
  const call = async (key: string, method: string, url: string, body?: unknown) => {
    const res = await fetch(`${stack.apiUrl}${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  say('webhooks: an endpoint that fails twice');
  const receiver = flakyReceiver();
  const port = await receiver.listen();
  await call(a.apiKey, 'POST', '/webhooks', {
    url: `http://127.0.0.1:${port}/hook`,
    events: ['upload.created', 'pin.pinned', 'pin.failed'],
  });

  say('a folder with a subfolder, and its snapshot');
  const folderId = (await call(a.apiKey, 'POST', '/folders', { name: 'record' })).folderId as string;
  const subId = (await call(a.apiKey, 'POST', '/folders', { name: 'sub', parentFolderId: folderId })).folderId as string;
  await call(a.apiKey, 'POST', '/upload/new', { content: 'top', name: 'top.txt', folderId });
  await call(a.apiKey, 'POST', '/upload/new', { content: 'below', name: 'below.txt', folderId: subId });
  await call(a.apiKey, 'POST', `/folders/${folderId}/snapshot`);
  await until(
    'snapshot complete',
    () => call(a.apiKey, 'GET', `/folders/${folderId}/snapshot`),
    (j) => j.status === 'complete',
  );
  await until(
    'webhook delivered',
    async () => receiver.count(),
    (n) => n >= 3,
  );

  say('IPNS: a publish, republish rounds, the name deleted');
  const ipnsName = (await call(a.apiKey, 'POST', '/ipns/keys', { name: 'record' })).ipnsName as string;
  const cid = (await call(a.apiKey, 'POST', '/upload/new', { content: 'named', name: 'n.txt' })).cid as string;
  await call(a.apiKey, 'POST', '/ipns/publish', { ipnsName, cid });
  await sleep(7_000); // IPNS_REPUBLISH_INTERVAL=2s: a few rounds
  await call(a.apiKey, 'DELETE', `/ipns/keys/${ipnsName}`);

  say('a pin that waits for its offline origin, then succeeds; one that times out');
  const waited = await stack.origin.add(crypto.randomBytes(50_000));
  // Content nobody has: its CID only, hashed by the stack's Kubo without keeping the bytes.
  const form = new FormData();
  form.append('file', new Blob([crypto.randomBytes(50_000)]), 'x');
  const never = (
    (await (
      await fetch(`${stack.env.KUBO_API_URL}/api/v0/add?only-hash=true&cid-version=1&raw-leaves=true`, { method: 'POST', body: form })
    ).json()) as { Hash: string }
  ).Hash;
  await stack.origin.stop();
  await call(a.apiKey, 'POST', '/pin', { cid: waited, origins: [stack.origin.swarmAddress] });
  await call(b.apiKey, 'POST', '/pin', { cid: never });
  await sleep(4_000);
  await stack.origin.start();
  await until(
    'pin done',
    () => call(a.apiKey, 'GET', `/pin/${waited}`),
    (j) => j.status === 'pinned',
  );
  await until(
    'pin timed out',
    () => call(b.apiKey, 'GET', `/pin/${never}`),
    (j) => j.status === 'failed',
    60_000,
  );

  say('unpin across users while the Cluster peer is down');
  const shared = `shared ${crypto.randomUUID()}`;
  const mine = (await call(a.apiKey, 'POST', '/upload/new', { content: shared, name: 's.txt' })).id as string;
  await call(b.apiKey, 'POST', '/upload/new', { content: shared, name: 's.txt' });
  const cluster = stack.engines.find((e) => e.name === 'cluster')!;
  await cluster.kill();
  await call(a.apiKey, 'DELETE', `/files/${mine}`);
  await sleep(3_000);
  await cluster.start();

  say('an S3 multipart upload');
  const s3 = createS3Load(stack.s3Url, { accessKeyId: a.keyPrefix, secretAccessKey: a.apiKey }, () => undefined);
  await s3.setup();
  await s3.multipart();
  const s3Problems = await s3.problems();
  if (s3Problems.length) throw new Error(`multipart: ${s3Problems.join('; ')}`);

  say('the sweep and the multipart cleanup (their schedules triggered), and an audit');
  const connection = await Connection.connect({ address: stack.env.TEMPORAL_ADDRESS! });
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    for (const job of [sweepJob, multipartCleanupJob]) await client.schedule.getHandle(job.scheduleId(config.temporal.taskQueue)).trigger();
    await client.workflow.execute(auditJob.workflowType, {
      workflowId: `record-audit-${Date.now()}`,
      taskQueue: config.temporal.taskQueue,
      args: [{ repair: false }],
    });
    await sleep(5_000);
  } finally {
    await connection.close();
  }
  await receiver.close();
}

/** Every execution's history, PER_TYPE of each type, into HISTORIES_DIR/<type>/. */
async function save(stack: ChaosStack): Promise<Record<string, number>> {
  const connection = await Connection.connect({ address: stack.env.TEMPORAL_ADDRESS! });
  const saved: Record<string, number> = {};
  try {
    const { namespace } = loadConfig(stack.env).temporal;
    const client = new Client({ connection, namespace });
    const byType = new Map<string, { workflowId: string; runId: string; status: string }[]>();
    for await (const wf of client.workflow.list()) {
      const list = byType.get(wf.type) ?? [];
      list.push({ workflowId: wf.workflowId, runId: wf.runId, status: wf.status.name });
      byType.set(wf.type, list);
    }
    for (const [type, runs] of byType) {
      // One of each status first, then the longest histories are as good as any: the first ones.
      const statuses = [...new Set(runs.map((r) => r.status))];
      const chosen = [...statuses.map((s) => runs.find((r) => r.status === s)!), ...runs]
        .filter((r, i, all) => all.indexOf(r) === i)
        .slice(0, PER_TYPE);
      const dir = path.join(HISTORIES_DIR, type);
      fs.mkdirSync(dir, { recursive: true });
      for (const run of chosen) {
        // As the SDK's replay documentation exports one: the CLI's JSON is what historyFromJSON
        // reads (historyToJSON of a fetched history fails here: two copies of protobufjs).
        const { stdout } = await execFileAsync(
          binaryPath('temporal', 'temporal'),
          [
            'workflow',
            'show',
            '--workflow-id',
            run.workflowId,
            '--run-id',
            run.runId,
            '--output',
            'json',
            '--address',
            stack.env.TEMPORAL_ADDRESS!,
            '--namespace',
            namespace,
            // The CLI's own config file and TEMPORAL_* variables are not this stack's.
            '--disable-config-file',
            '--disable-config-env',
          ],
          { maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH ?? '' } },
        );
        const name = `${run.status.toLowerCase()}-${crypto.createHash('sha256').update(`${run.workflowId}/${run.runId}`).digest('hex').slice(0, 10)}`;
        fs.writeFileSync(
          path.join(dir, `${name}.json`),
          `${JSON.stringify({ workflowId: run.workflowId, history: JSON.parse(stdout) }, null, 1)}\n`,
        );
      }
      saved[type] = chosen.length;
    }
  } finally {
    await connection.close();
  }
  return saved;
}

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-record-'));
  const stack = await startChaosStack(dataDir, {
    env: { IPNS_REPUBLISH_INTERVAL: '2s', PIN_TIMEOUT: '10s', WEBHOOK_ALLOW_PRIVATE: 'true' },
  });
  try {
    await drive(stack);
    const saved = await save(stack);
    say(`saved under ${path.relative(projectRoot, HISTORIES_DIR)}: ${JSON.stringify(saved)}`);
    return 0;
  } finally {
    await stack.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    say(err.stack ?? err.message);
    process.exit(1);
  },
);
