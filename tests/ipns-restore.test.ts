// IPNS names survive losing the things around them: the worker is killed and another one
// takes the name's job over, and that worker writes to a Kubo node with a fresh repository
// (no keystore, no records), as when the stack's Kubo is replaced. The republish restores the
// name there from MongoDB alone. Runs on a task queue of its own, so only this file's workers
// take its jobs (the second one talks to a different Kubo than the rest of the suite).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ApiServer } from '../api/server.js';
import { readIpnsRecord } from '../infra/ipfs/ipns.js';
import { startKubo, type KuboNode } from '../stack/kubo.js';
import { freePorts } from '../stack/ports.js';
import { call, createUser, startTestApi, testEnv, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, syncRoundsDone, type WorkerProcess } from './support/worker.js';

const env = {
  TEMPORAL_TASK_QUEUE: `stupa-ipns-restore-${crypto.randomBytes(4).toString('hex')}`,
  MASTER_KEY: crypto.randomBytes(32).toString('hex'),
  IPNS_REPUBLISH_INTERVAL: '2s',
};
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-ipns-fresh-kubo-'));
let api: ApiServer;
let fresh: KuboNode;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  const [apiPort, gateway, swarm] = (await freePorts(3)) as [number, number, number];
  [api, fresh] = await Promise.all([
    startTestApi(env),
    startKubo({
      dataDir: path.join(dir, 'kubo'),
      logDir: path.join(dir, 'logs'),
      ports: { api: apiPort, gateway, swarm },
      name: 'kubo-fresh',
    }),
  ]);
  workers.push(await startWorkerProcess(env));
});
afterAll(async () => {
  await Promise.all([api?.close(), ...workers.map((w) => w.kill()), fresh?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The record a Kubo node serves for the name, or null when it has none. */
async function recordIn(kuboApiUrl: string, ipnsName: string) {
  const res = await fetch(new URL(`/api/v0/routing/get?arg=/ipns/${ipnsName}`, kuboApiUrl), { method: 'POST' });
  const last = JSON.parse((await res.text()).trim().split('\n').pop()!) as { Extra?: string };
  return last.Extra ? readIpnsRecord(Buffer.from(last.Extra, 'base64')) : null;
}

test('a worker killed mid-job is replaced; the next one republishes the name from MongoDB into a Kubo with a fresh repository', async () => {
  const user: TestUser = await createUser(api, 'karma');
  const { ipnsName } = (await call(api, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: 'lasting' } })).body;
  const uploaded = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `restore ${ipnsName}`, name: 'r.txt' } });
  const cid = uploaded.body.cid as string;
  const published = await call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid } });
  expect(published.body).toMatchObject({ sequence: 1, published: true });
  // The content's pin jobs run on this file's queue: let the first worker finish them.
  await syncRoundsDone(api.deps.temporal.client, cid);

  const stackKubo = testEnv().KUBO_API_URL!;
  const first = await recordIn(stackKubo, ipnsName);
  expect(first).toMatchObject({ value: `/ipfs/${cid}`, sequence: 1 });
  expect(await recordIn(fresh.apiUrl, ipnsName)).toBeNull();
  // The first worker republishes before it is killed.
  const beforeKill = await eventually(
    () => recordIn(stackKubo, ipnsName),
    (r) => r !== null && r.validity > first!.validity,
    20_000,
    'a republish by the first worker',
  );

  await workers.shift()!.kill('SIGKILL');
  const killedAt = Date.now();
  workers.push(await startWorkerProcess({ ...env, KUBO_API_URL: fresh.apiUrl }));

  // The fresh node never saw the name, its key or a record; the job brings the current one.
  const restored = await eventually(
    () => recordIn(fresh.apiUrl, ipnsName),
    (r) => r !== null,
    90_000,
    'the record in the fresh Kubo',
  );
  expect(restored).toMatchObject({ value: `/ipfs/${cid}`, sequence: 1 });
  expect(restored!.validity > beforeKill!.validity).toBe(true);
  // The name keeps being republished there, and its state says so.
  const later = await eventually(
    () => recordIn(fresh.apiUrl, ipnsName),
    (r) => r !== null && r.validity > restored!.validity,
    20_000,
    'a second republish in the fresh Kubo',
  );
  expect(later).toMatchObject({ value: `/ipfs/${cid}`, sequence: 1 });
  const listed = (await call(api, 'GET', `/ipns/keys/${ipnsName}`, { key: user.apiKey })).body;
  expect(listed).toMatchObject({ status: 'active', currentCid: cid, sequence: 1 });
  expect(listed.lastRepublishedAt).toBeGreaterThan(killedAt);
  // A publish is the API's own, stored in the API's Kubo; the job's next republish brings the
  // new sequence to the fresh node too.
  expect((await call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid } })).body.sequence).toBe(2);
  expect(await recordIn(stackKubo, ipnsName)).toMatchObject({ value: `/ipfs/${cid}`, sequence: 2 });
  await eventually(
    () => recordIn(fresh.apiUrl, ipnsName),
    (r) => r?.sequence === 2,
    20_000,
    'sequence 2 in the fresh Kubo',
  );
}, 180_000);
