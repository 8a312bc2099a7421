// IPNS names on the real stack: keys and tenancy, plan limits of both variants, publish
// (records signed by the service, stored in Kubo and read back from it), resolve, the target
// held like a pin, republishing on a short interval, delete stopping the job, DNSLink.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { multiaddr } from '@multiformats/multiaddr';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { readIpnsRecord, storeIpnsRecord } from '../infra/ipfs/ipns.js';
import { createKubo } from '../infra/ipfs/kubo.js';
import { startKubo } from '../stack/kubo.js';
import { freePorts } from '../stack/ports.js';
import { ipnsJob, STATUS_QUERY, type IpnsJobStatus } from '../infra/temporal/contracts/ipns.js';
import { bytes, cluster, kubo, MiB, multipart, postStream } from './support/content.js';
import { startApiProcess } from '../stack/services.js';
import { call, createUser, errorReason, plansFile, startTestApi, tempDir, testEnv, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

// The API and the worker share the master key: the worker unseals the keys the API made.
const env = {
  TEMPORAL_TASK_QUEUE: testTaskQueue(),
  MASTER_KEY: crypto.randomBytes(32).toString('hex'),
  IPNS_REPUBLISH_INTERVAL: '2s',
  PLANS_FILE: plansFile({ karma: { ipnsNames: 3, ipnsPublishesPerMonth: 6 }, samsara: { ipnsNames: 4, ipnsPublishesPerMonth: 1000 } }),
};
let api: ApiServer;
let worker: WorkerProcess;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const upload = async (user: TestUser, content: string) =>
  (await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: `${content}.txt` } })).body.cid as string;
const newName = async (user: TestUser, name: string) => call(api, 'POST', '/ipns/keys', { key: user.apiKey, body: { name } });
const publish = (user: TestUser, ipnsName: string, cid: string) =>
  call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid } });

/** The record Kubo serves for the name. */
async function recordInKubo(ipnsName: string) {
  const res = await fetch(new URL(`/api/v0/routing/get?arg=/ipns/${ipnsName}`, api.deps.config.kubo.apiUrl), { method: 'POST' });
  const text = await res.text();
  const event = JSON.parse(text.trim().split('\n').pop()!) as { Extra?: string };
  if (!event.Extra) throw new Error(`routing get answered ${res.status}: ${text.slice(0, 300)}`);
  return readIpnsRecord(Buffer.from(event.Extra, 'base64'));
}

test('names: created with an Ed25519 key (k51…), unique per user, listed, another user gets 404; limits answer 402', async () => {
  const user = await createUser(api, 'karma');
  const created = await newName(user, 'site');
  expect(created.status).toBe(201);
  expect(created.body).toEqual({ ipnsName: expect.stringMatching(/^k51[a-z0-9]{59}$/), keyName: 'site', createdAt: expect.any(Number) });
  const { ipnsName } = created.body;
  expect(errorReason(await newName(user, 'site'))).toBe('IPNS_NAME_EXISTS');

  const listed = await call(api, 'GET', '/ipns/keys', { key: user.apiKey });
  expect(listed.body).toEqual([
    {
      ipnsName,
      keyName: 'site',
      currentCid: null,
      sequence: 0,
      lastPublishedAt: null,
      publishCountMonth: 0,
      status: 'unpublished',
      lastRepublishedAt: null,
      createdAt: created.body.createdAt,
    },
  ]);
  // The job of the name runs, findable by the name.
  const description = await api.deps.temporal.client.workflow.getHandle(ipnsJob.workflowId({ ipnsName })).describe();
  expect(description.status.name).toBe('RUNNING');

  const other = await createUser(api, 'karma');
  const cid = await upload(other, 'not yours');
  expect(errorReason(await call(api, 'GET', `/ipns/keys/${ipnsName}`, { key: other.apiKey }))).toBe('NOT_FOUND');
  expect((await publish(other, ipnsName, cid)).status).toBe(404);
  expect((await call(api, 'DELETE', `/ipns/keys/${ipnsName}`, { key: other.apiKey })).status).toBe(404);
  expect(errorReason(await call(api, 'GET', '/ipns/keys/not-a-name', { key: user.apiKey }))).toBe('INVALID_IPNS_NAME');

  // karma allows 3 here; the free plan of variant A has none.
  expect((await newName(user, 'two')).status).toBe(201);
  expect((await newName(user, 'three')).status).toBe(201);
  expect(errorReason(await newName(user, 'four'))).toBe('IPNS_NAME_LIMIT');
  const free = await createUser(api, 'dharma');
  const refused = await newName(free, 'x');
  expect(refused.status).toBe(402);
  expect(errorReason(refused)).toBe('IPNS_NAME_LIMIT');
  // Deleting one makes room again.
  expect((await call(api, 'DELETE', `/ipns/keys/${ipnsName}`, { key: user.apiKey })).body).toEqual({ success: true });
  expect((await newName(user, 'four')).status).toBe(201);
}, 60_000);

test('40 publishes of 4 names at once: each name advanced 10, every sequence given once, Kubo holds each tenth; they shared their updates', async () => {
  const user = await createUser(api, 'samsara');
  const targets = [await upload(user, 'together-a'), await upload(user, 'together-b')];
  const names: string[] = [];
  for (const n of ['t1', 't2', 't3', 't4']) names.push((await newName(user, n)).body.ipnsName);
  const updates = () =>
    (api.deps.db.operations().get('findOneAndUpdate ipns_names') ?? 0) + (api.deps.db.operations().get('bulkWrite ipns_names') ?? 0);
  const before = updates();
  const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => publish(user, names[i % 4]!, targets[i % 3 === 0 ? 0 : 1]!)));
  expect(replies.map((r) => r.status)).toEqual(Array(40).fill(200));
  expect(updates() - before).toBeLessThan(40);
  for (const name of names) {
    const mine = replies.filter((r) => r.body.ipnsName === name);
    expect(mine.map((r) => r.body.sequence as number).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const record = (await api.deps.db.ipnsNames.get(name))!;
    const last = mine.find((r) => r.body.sequence === 10)!.body.cid as string;
    expect(record).toMatchObject({ sequence: 10, publishCount: 10, cid: last });
    const stored = await recordInKubo(name);
    expect([stored.sequence, stored.value]).toEqual([10, `/ipfs/${last}`]);
  }
});

test('two API processes publishing one name at once: Kubo ends holding the higher sequence of every pair', async () => {
  const user = await createUser(api, 'samsara');
  const targets = [await upload(user, 'pair-a'), await upload(user, 'pair-b')];
  const [port] = await freePorts(1);
  // Republishing hourly (the name is made there): only the publishes put its records.
  const other = await startApiProcess(testEnv({ ...env, API_PORT: String(port), IPNS_REPUBLISH_INTERVAL: '1h', LOG_LEVEL: 'silent' }), {
    logDir: tempDir('stupa-api-'),
    name: 'api-b',
  });
  const otherUrl = `http://127.0.0.1:${port}`;
  try {
    const { ipnsName } = (await call(otherUrl, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: 'pair' } })).body;
    for (let round = 0; round < 30; round++) {
      const replies = await Promise.all(
        [api.url, otherUrl].map((url, i) => call(url, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid: targets[i] } })),
      );
      expect(replies.map((r) => r.status)).toEqual([200, 200]);
      const top = replies.reduce((a, b) => (a.body.sequence > b.body.sequence ? a : b)).body;
      expect(top.sequence).toBe(2 * round + 2);
      // Kubo compares and then writes, so the lower of two puts at once could land last; the
      // higher's publisher reads Kubo's record back and puts its own again (infra/ipfs/ipns.ts).
      const held = await eventually(
        () => recordInKubo(ipnsName),
        (r) => r.sequence === top.sequence,
        3_000,
        `sequence ${top.sequence} in Kubo`,
      );
      expect(held.value).toBe(`/ipfs/${top.cid}`);
    }
  } finally {
    await other.stop();
  }
}, 120_000);

test('publish: the signed record is in Kubo with the next sequence; resolve answers it; the target is held; the month limit is 402', async () => {
  const user = await createUser(api, 'karma');
  const { ipnsName } = (await newName(user, 'pub')).body;
  const first = await upload(user, 'first target');
  // More than one chunk: a dag-pb root, which has a CIDv0 form too.
  const form = multipart({}, { name: 'two-chunks.bin', source: bytes(MiB + 1, 'ipns') });
  const second = (await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body)).body.cid as string;

  const published = await publish(user, ipnsName, first);
  expect(published.body).toEqual({ ipnsName, cid: first, published: true, sequence: 1, publishedAt: expect.any(Number) });
  expect(await recordInKubo(ipnsName)).toMatchObject({ value: `/ipfs/${first}`, sequence: 1 });
  // Kubo resolves it too (its cache skipped).
  const resolvedByKubo: string[] = [];
  for await (const p of kubo().name.resolve(`/ipns/${ipnsName}`, { nocache: true })) resolvedByKubo.push(p);
  expect(resolvedByKubo).toEqual([`/ipfs/${first}`]);

  // A CIDv0 is taken, and stored as its CIDv1.
  const v0 = parseCid(second).cid.toV0().toString();
  expect((await publish(user, ipnsName, v0)).body).toMatchObject({ cid: second, sequence: 2 });
  expect(await recordInKubo(ipnsName)).toMatchObject({ value: `/ipfs/${second}`, sequence: 2 });
  expect((await call(api, 'GET', `/ipns/resolve/${ipnsName}`, { key: user.apiKey })).body).toEqual({ ipnsName, cid: second, sequence: 2 });
  // Any user resolves any name.
  const stranger = await createUser(api);
  expect((await call(api, 'GET', `/ipns/resolve/${ipnsName}`, { key: stranger.apiKey })).body.cid).toBe(second);

  // The name holds its current target, as a pin does; not its previous one.
  expect((await api.deps.db.holds.of(parseCid(second).multihash)).holders).toContain(`ipns:${ipnsName}`);
  expect((await api.deps.db.holds.of(parseCid(first).multihash)).holders).not.toContain(`ipns:${ipnsName}`);

  const listed = (await call(api, 'GET', '/ipns/keys', { key: user.apiKey })).body[0];
  expect(listed).toMatchObject({ currentCid: second, sequence: 2, publishCountMonth: 2, status: 'active' });

  // 6 publishes a month here: 4 more pass, the next is refused and stores nothing.
  for (let i = 0; i < 4; i++) expect((await publish(user, ipnsName, first)).status).toBe(200);
  const over = await publish(user, ipnsName, second);
  expect(over.status).toBe(402);
  expect(errorReason(over)).toBe('IPNS_PUBLISH_LIMIT');
  expect(await recordInKubo(ipnsName)).toMatchObject({ value: `/ipfs/${first}`, sequence: 6 });

  expect(errorReason(await publish(user, ipnsName, 'not-a-cid'))).toBe('INVALID_CID');

  // What lets publishes bypass the name's job: Kubo keeps the highest sequence, so an older
  // record stored late (a republish that read the name before a publish) changes nothing.
  const stored = (await api.deps.db.ipnsNames.get(ipnsName))!;
  await storeIpnsRecord(api.deps.config.kubo.apiUrl, api.deps.config.masterKey, { ipnsName, sealedKey: stored.sealedKey }, second, 3);
  expect(await recordInKubo(ipnsName)).toMatchObject({ value: `/ipfs/${first}`, sequence: 6 });
}, 60_000);

test('a target only the name holds is pinned in Cluster for it, and unpinned when the name moves on to content held otherwise', async () => {
  const user = await createUser(api, 'karma');
  const { ipnsName } = (await newName(user, 'alone')).body;
  // Content in Kubo that no record of this service holds.
  const added = await kubo().add(`only the name holds this ${ipnsName}`, { cidVersion: 1, rawLeaves: true, pin: false });
  const lonely = added.cid.toString();
  expect(await cluster().allocation(lonely)).toBeNull();
  await publish(user, ipnsName, lonely);
  await syncRoundsDone(api.deps.temporal.client, lonely);
  expect((await cluster().allocation(lonely))?.metadata).toMatchObject({ service: 'stupa' });

  // The next target is held by its upload too: the name's hold on it changes nothing in
  // Cluster, while the first target loses its only holder and is unpinned.
  const uploaded = await upload(user, `held by its upload ${ipnsName}`);
  await syncRoundsDone(api.deps.temporal.client, uploaded);
  await publish(user, ipnsName, uploaded);
  await syncRoundsDone(api.deps.temporal.client, lonely);
  expect(await cluster().allocation(lonely)).toBeNull();
  expect((await cluster().allocation(uploaded))?.metadata).toMatchObject({ service: 'stupa' });
  expect((await api.deps.db.holds.of(parseCid(uploaded).multihash)).holders).toEqual(
    expect.arrayContaining([`ipns:${ipnsName}`, expect.stringMatching(/^file:/)]),
  );
}, 60_000);

test('a name given a target another name holds pins it: two names published to one target at once each see the other', async () => {
  const user = await createUser(api, 'karma');
  const [a, b] = [(await newName(user, 'twin-a')).body.ipnsName as string, (await newName(user, 'twin-b')).body.ipnsName as string];
  const target = parseCid((await kubo().add(`two names ${a}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
  // Name A's publish has written its record and not yet looked at who else holds the target:
  // it will find B's record, as B's finds A's.
  await api.deps.db.ipnsNames.advance(a, user.userId, { cid: target.v1, multihash: target.multihash }, Date.now());
  expect((await publish(user, b, target.v1)).status).toBe(200);
  await syncRoundsDone(api.deps.temporal.client, target.v1);
  expect((await cluster().allocation(target.v1))?.metadata).toMatchObject({ service: 'stupa' });
}, 60_000);

test("a second Kubo node, connected to the stack's over loopback, resolves a published name at once, and sees the next publish", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-ipns-kubo2-'));
  const [apiPort, gateway, swarm] = (await freePorts(3)) as [number, number, number];
  const second = await startKubo({
    dataDir: path.join(dir, 'kubo'),
    logDir: path.join(dir, 'logs'),
    ports: { api: apiPort, gateway, swarm },
    name: 'kubo-2',
  });
  try {
    const other = createKubo(second.apiUrl);
    await other.swarm.connect(multiaddr(process.env.STUPA_TEST_KUBO_SWARM_ADDRESS!));
    const user = await createUser(api, 'karma');
    const { ipnsName } = (await newName(user, 'network')).body;
    const resolveThere = async () => {
      const paths: string[] = [];
      for await (const p of other.name.resolve(`/ipns/${ipnsName}`, { nocache: true })) paths.push(p);
      return paths;
    };
    const first = await upload(user, 'seen elsewhere');
    await publish(user, ipnsName, first);
    const t = Date.now();
    expect(await resolveThere()).toEqual([`/ipfs/${first}`]);
    expect(Date.now() - t).toBeLessThan(2_000);
    const next = await upload(user, 'seen elsewhere, next');
    await publish(user, ipnsName, next);
    expect(await resolveThere()).toEqual([`/ipfs/${next}`]);
  } finally {
    await second.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test('republish: the current record is signed again on the interval (same sequence, later validity); delete stops the job', async () => {
  const user = await createUser(api, 'karma');
  const { ipnsName } = (await newName(user, 'again')).body;
  const cid = await upload(user, 'republished target');
  await publish(user, ipnsName, cid);
  const before = await recordInKubo(ipnsName);
  const later = await eventually(
    () => recordInKubo(ipnsName),
    (r) => r.validity > before.validity,
    20_000,
    'a republished record',
  );
  expect(later).toMatchObject({ value: `/ipfs/${cid}`, sequence: before.sequence });
  const handle = api.deps.temporal.client.workflow.getHandle(ipnsJob.workflowId({ ipnsName }));
  // The workflow counts the republish when its activity's result reaches it, a moment after
  // Kubo has the record (a run on a loaded machine queried in between: tests/ipns.test.ts).
  const status = await eventually(
    () => handle.query<IpnsJobStatus>(STATUS_QUERY),
    (s) => s.republishes > 0,
    20_000,
    'the republish counted by its workflow',
  );
  expect(status).toMatchObject({ paused: false, failingSince: null });
  const name = await eventually(
    () => call(api, 'GET', `/ipns/keys/${ipnsName}`, { key: user.apiKey }),
    (r) => r.body.lastRepublishedAt > 0,
    20_000,
    'lastRepublishedAt',
  );
  expect(name.status).toBe(200);

  expect((await call(api, 'DELETE', `/ipns/keys/${ipnsName}`, { key: user.apiKey })).status).toBe(200);
  await handle.result();
  expect((await handle.describe()).status.name).toBe('COMPLETED');
  expect(await api.deps.db.ipnsNames.get(ipnsName)).toBeNull();
  expect((await api.deps.db.holds.of(parseCid(cid).multihash)).holders).not.toContain(`ipns:${ipnsName}`);
}, 60_000);

test('resolve: a malformed name is 400; a name nobody published is 404 within the timeout', async () => {
  const user = await createUser(api);
  expect(errorReason(await call(api, 'GET', '/ipns/resolve/k51notaname', { key: user.apiKey }))).toBe('INVALID_IPNS_NAME');
  const { ipnsName } = (await newName(await createUser(api, 'karma'), 'never')).body;
  // Held here but never published: resolved through Kubo, which has no record either.
  const t = Date.now();
  const missing = await call(api, 'GET', `/ipns/resolve/${ipnsName}`, { key: user.apiKey });
  expect(errorReason(missing)).toBe('NOT_FOUND');
  expect(Date.now() - t).toBeLessThan(8_000);
}, 30_000);

test('DNSLink: the TXT record to create; verify says whether DNS has it, or that DNS could not be asked', async () => {
  const user = await createUser(api, 'karma');
  const { ipnsName } = (await newName(user, 'dns')).body;
  const plain = await call(api, 'GET', `/ipns/keys/${ipnsName}/dnslink?domain=Example.com`, { key: user.apiKey });
  expect(plain.body).toEqual({
    domain: 'example.com',
    record: { type: 'TXT', name: '_dnslink.example.com', value: `dnslink=/ipns/${ipnsName}` },
  });
  const verified = await call(api, 'GET', `/ipns/keys/${ipnsName}/dnslink?domain=example.com&verify=true`, { key: user.apiKey });
  expect(verified.status).toBe(200);
  // No DNS answer here has the record: false when DNS answered, null when it could not be asked.
  expect([false, null]).toContain(verified.body.verified);
  if (verified.body.verified === null) expect(verified.body.verifyError).toMatch(/DNS could not be asked/);
  expect(errorReason(await call(api, 'GET', `/ipns/keys/${ipnsName}/dnslink?domain=not_a_domain`, { key: user.apiKey }))).toBe(
    'INVALID_DOMAIN',
  );
}, 30_000);
