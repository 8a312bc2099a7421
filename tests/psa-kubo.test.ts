// Kubo's own pinning-service client (`ipfs pin remote …`, the stack's Kubo binary) against
// /psa: a second Kubo node started here is the client, and the content it asks to pin exists
// only on that node, so the service fetches it from the origins the client sends.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ApiServer } from '../api/server.js';
import { createKubo, type Kubo } from '../infra/ipfs/kubo.js';
import { binaryPath } from '../stack/binaries.js';
import { startKubo, type KuboNode } from '../stack/kubo.js';
import { freePorts } from '../stack/ports.js';
import { kubo } from './support/content.js';
import { call, createUser, startTestApi, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

const exec = promisify(execFile);
const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-psa-kubo-'));
const repo = path.join(dir, 'kubo');
let api: ApiServer;
let worker: WorkerProcess;
let client: KuboNode;
let ports: { api: number; gateway: number; swarm: number };
let user: TestUser;

const startClient = () => startKubo({ dataDir: repo, logDir: path.join(dir, 'logs'), ports, name: 'kubo-client' });

/** `ipfs …` of the client node (the CLI finds its running daemon through IPFS_PATH). */
async function ipfs(...args: string[]): Promise<string> {
  const { stdout } = await exec(binaryPath('kubo', 'ipfs'), args, {
    env: { PATH: process.env.PATH, HOME: dir, IPFS_PATH: repo },
    timeout: 120_000,
  });
  return stdout;
}

const lines = (text: string) => text.split('\n').filter(Boolean);
const jsonLines = (text: string) => lines(text).map((l) => JSON.parse(l) as { Cid: string; Name: string; Status: string });

beforeAll(async () => {
  const [a, g, s] = (await freePorts(3)) as [number, number, number];
  ports = { api: a, gateway: g, swarm: s };
  [api, worker, client] = await Promise.all([startTestApi(env), startWorkerProcess(env), startClient()]);
  user = await createUser(api, 'karma');
  await ipfs('pin', 'remote', 'service', 'add', 'stupa', `${api.url}/psa`, user.apiKey);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), client?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
});

async function onlyOnClient(node: Kubo, label: string): Promise<string> {
  return (await node.add(`${label} ${Math.random()}`, { cidVersion: 1, rawLeaves: true })).cid.toString();
}

test('pin remote add of content only the client has: waits until pinned, the service fetched it from the origins', async () => {
  const node = createKubo(client.apiUrl);
  const cid = await onlyOnClient(node, 'remote add');
  const before = await fetch(`${api.deps.config.kubo.apiUrl}/api/v0/block/stat?arg=${cid}&offline=true`, { method: 'POST' });
  expect(await before.text()).toMatch(/not found/i);
  // Without --background the client polls the request until it is pinned.
  await ipfs('pin', 'remote', 'add', '--service=stupa', '--name=first', cid);
  const listed = jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--enc=json'));
  expect(listed).toEqual([{ Cid: cid, Name: 'first', Status: 'pinned' }]);
  // The bytes are in the stack's Kubo and pinned in Cluster for this account.
  expect(Buffer.concat(await toArray(kubo().cat(cid))).toString()).toMatch(/^remote add /);
  expect((await api.deps.cluster.allocation(cid))?.metadata).toMatchObject({ service: 'stupa' });
  expect((await call(api, 'GET', `/pin/${cid}`, { key: user.apiKey })).body).toMatchObject({ status: 'pinned', name: 'first' });
}, 120_000);

test('pin remote ls over more than one page lists every pin once, by status; service ls --stat counts; rm --force removes', async () => {
  // 12 more pins (13 in all, over Kubo's page of 10), made through the API from the stack's Kubo.
  const cids = await Promise.all(
    Array.from({ length: 12 }, async (_, i) =>
      (await kubo().add(`page ${i} ${Math.random()}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString(),
    ),
  );
  await Promise.all(cids.map((cid, i) => call(api, 'POST', '/psa/pins', { key: user.apiKey, body: { cid, name: `many-${i}` } })));
  await eventually(
    async () => jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--status=pinned', '--enc=json')),
    (pins) => pins.length === 13,
    60_000,
    '13 pinned',
  );
  const all = jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--status=queued,pinning,pinned,failed', '--enc=json'));
  expect(all).toHaveLength(13);
  expect(new Set(all.map((p) => p.Cid)).size).toBe(13);
  expect(all.map((p) => p.Cid)).toEqual(expect.arrayContaining(cids));
  expect(jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--status=queued,pinning', '--enc=json'))).toEqual([]);
  expect(jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--name=many-3', '--enc=json'))).toEqual([
    { Cid: cids[3], Name: 'many-3', Status: 'pinned' },
  ]);

  // --stat asks for every status at once (four requests): none is rate limited.
  const stat = JSON.parse(await ipfs('pin', 'remote', 'service', 'ls', '--stat', '--enc=json')) as {
    RemoteServices: { Service: string; Stat: { Status: string; PinCount: Record<string, number> } }[];
  };
  expect(stat.RemoteServices[0]).toMatchObject({
    Service: 'stupa',
    Stat: { Status: 'valid', PinCount: { Queued: 0, Pinning: 0, Pinned: 13, Failed: 0 } },
  });

  await ipfs('pin', 'remote', 'rm', '--service=stupa', `--cid=${cids[0]},${cids[1]}`, '--force');
  const left = jsonLines(await ipfs('pin', 'remote', 'ls', '--service=stupa', '--enc=json'));
  expect(left).toHaveLength(11);
  expect(left.map((p) => p.Cid)).not.toContain(cids[0]);
  expect((await call(api, 'GET', `/pin/${cids[0]}`, { key: user.apiKey })).status).toBe(404);
}, 180_000);

test("Kubo's MFS pinning policy keeps the client's MFS root pinned at the service", async () => {
  const node = createKubo(client.apiUrl);
  await node.files.write('/policy.txt', `mfs policy ${Math.random()}`, { create: true });
  const root = (await node.files.stat('/')).cid.toString();
  // The policy is read when the daemon starts.
  await client.stop();
  const configFile = path.join(repo, 'config');
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8'));
  config.Pinning.RemoteServices.stupa.Policies = { MFS: { Enable: true, PinName: '', RepinInterval: '5s' } };
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2));
  client = await startClient();
  const pinned = await eventually(
    () => call(api, 'GET', `/psa/pins?cid=${root}`, { key: user.apiKey }),
    (r) => r.body.count === 1,
    90_000,
    'the MFS root pinned by the policy',
  );
  expect(pinned.body.results[0].pin.name).toBe(`policy/${client.peerId}/mfs`);
}, 150_000);

async function toArray<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}
