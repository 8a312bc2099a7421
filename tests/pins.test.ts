import { WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { call, createUser, errorReason, startTestApi, type TestUser } from './support/stack.js';
import { bytes, cluster, collect, kubo } from './support/content.js';
import { startSecondNode } from './support/second-node.js';
import { freePort } from '../stack/ports.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';
import { pinJob } from '../infra/temporal/contracts/pins.js';
import { PEERS_MEMORY_MS } from '../infra/constants.js';
import { recordingRelay } from './support/kubo-relay.js';

let api: ApiServer;
let worker: WorkerProcess;
let alice: TestUser;
let bob: TestUser;
let second: Awaited<ReturnType<typeof startSecondNode>>;
const queue = testTaskQueue();

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue, PIN_TIMEOUT: '4s' };
  [api, worker, second] = await Promise.all([startTestApi(env), startWorkerProcess(env), startSecondNode()]);
  [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), second?.node.stop()]);
});

const pinStatus = (user: TestUser, cid: string) => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey });
/** The pin's answer once it says `pinned` (within 30 s). */
const untilPinned = (user: TestUser, cid: string) =>
  eventually(
    () => pinStatus(user, cid),
    (r) => r.body.status === 'pinned',
    30_000,
    'pinned',
  );
const clusterStatuses = async (cid: string) => Object.values((await cluster().status(cid)).peer_map).map((p) => p.status);
const inCluster = async (cid: string) => (await cluster().allocations()).some((a) => a.cid === cid);
/** Resolves once Cluster no longer lists the CID (within 30 s). */
const untilUnpinnedInCluster = (cid: string) =>
  eventually(
    () => inCluster(cid),
    (v) => v === false,
    30_000,
    'unpinned from cluster',
  );

/** Content that only the second node has. */
async function remoteContent(seed: string, size = 300_000): Promise<string> {
  const added = await second.client.add(await collect(bytes(size, seed)), { cidVersion: 1, rawLeaves: true, chunker: 'size-1048576' });
  return added.cid.toString();
}

test('a pin of content that only another node has is fetched through its origin', async () => {
  const cid = await remoteContent('only-on-node-2');
  // The stack's Kubo does not have it.
  await expect(collect(kubo().cat(cid, { offline: true, timeout: 1000 } as never))).rejects.toThrow();

  const res = await call(api, 'POST', '/pin', {
    key: alice.apiKey,
    body: { cid, name: 'remote', origins: [second.node.swarmAddress], metadata: { app: 't' } },
  });
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({
    cid,
    status: 'queued',
    name: 'remote',
    origins: [second.node.swarmAddress],
    metadata: { app: 't' },
    error: null,
  });
  const requestId = res.body.requestId;

  const done = await untilPinned(alice, cid);
  expect(done.body).toMatchObject({ requestId, cid, status: 'pinned', size: 300_000, pinnedAt: expect.any(Number) });
  expect(await clusterStatuses(cid)).toEqual(['pinned']);
  // The peers that hold it, as Cluster reports them: the test stack's one peer.
  const peer = (await cluster().id()).id;
  expect(done.body.peers).toEqual([{ peer, name: 'stupa', status: 'pinned' }]);
  expect((await collect(kubo().cat(cid))).equals(await collect(bytes(300_000, 'only-on-node-2')))).toBe(true);
  expect((await api.deps.db.holds.of(parseCid(cid).multihash)).holders).toEqual([`pin:${requestId}`]);
  // Counted by the call that marked it pinned, just after the mark (core/pin-steps.ts).
  await eventually(
    () => api.deps.db.usage.used(alice.userId),
    (v) => v === 300_000,
    10_000,
    'pin counted in usage',
  );

  // Asking again gives the same request, not a second job.
  const again = await call(api, 'POST', '/pins', { key: alice.apiKey, body: { cid } });
  expect(again.status).toBe(202);
  expect(again.body.requestId).toBe(requestId);
  expect(await api.deps.db.pins.model.countDocuments({ userId: alice.userId, cid })).toBe(1);

  // Operators find the job by CID in Temporal.
  const found: string[] = [];
  for await (const wf of api.deps.temporal.client.workflow.list({ query: `Cid="${cid}" AND UserId="${alice.userId}"` }))
    found.push(wf.workflowId);
  expect(found).toContain(`pin:${cid}:${alice.userId}`);
});

test("clients polling a pinned CID share Cluster's view of its peers: asked once for a burst, again a second later", async () => {
  const uploaded = await call(api, 'POST', '/upload/new', {
    key: alice.apiKey,
    body: { content: `polled ${Date.now()}`, name: 'polled.txt' },
  });
  const { cid } = uploaded.body as { cid: string };
  expect((await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid } })).status).toBe(202);
  await untilPinned(alice, cid);
  const relay = await recordingRelay(process.env.STUPA_TEST_CLUSTER_API_URL!);
  const reader = await startTestApi({ TEMPORAL_TASK_QUEUE: queue, CLUSTER_API_URL: relay.url });
  try {
    const asked = () => relay.seen.filter((s) => s.url === `/pins/${cid}`).length;
    const burst = await Promise.all(Array.from({ length: 50 }, () => call(reader, 'GET', `/pin/${cid}`, { key: alice.apiKey })));
    for (const r of burst) expect(r.body).toMatchObject({ status: 'pinned', peers: [{ status: 'pinned' }] });
    expect(asked()).toBe(1);
    await new Promise((r) => setTimeout(r, PEERS_MEMORY_MS + 100));
    expect((await call(reader, 'GET', `/pin/${cid}`, { key: alice.apiKey })).body.peers).toEqual(burst[0]!.body.peers);
    expect(asked()).toBe(2);
  } finally {
    await reader.close();
    await relay.close();
  }
});

test('a pin nobody can provide ends failed with TIMEOUT, and its hold is released', async () => {
  const cid = 'bafkreie5zj4wlbm4snbhx3tdjdz5ukikhfxygkxsf7xjadb3vdk6elxbbe'; // random bytes nobody has
  const res = await call(api, 'POST', '/pin', { key: bob.apiKey, body: { cid } });
  expect(res.status).toBe(202);
  const failed = await eventually(
    () => pinStatus(bob, cid),
    (r) => r.body.status === 'failed',
    30_000,
    'failed',
  );
  expect(failed.body.error).toEqual({ reason: 'TIMEOUT', details: expect.stringContaining('not fetched in time') });
  await untilUnpinnedInCluster(cid);
  expect((await api.deps.db.holds.of(parseCid(cid).multihash)).holders).toEqual([]);
});

test('CIDv0 and CIDv1 name the same content and the same hold', async () => {
  const k = kubo();
  const v0 = (await k.add(Buffer.from('legacy content'), { cidVersion: 0, rawLeaves: false })).cid.toString();
  expect(v0).toMatch(/^Qm/);
  const v1 = parseCid(v0).v1;
  const res = await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid: v0 } });
  expect(res.status).toBe(202);
  expect(res.body.cid).toBe(v1);
  await untilPinned(alice, v0);
  expect((await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid: v1 } })).body.requestId).toBe(res.body.requestId);
  expect((await call(api, 'DELETE', `/pin/${v1}`, { key: alice.apiKey })).status).toBe(200);
  expect((await pinStatus(alice, v0)).status).toBe(404);
});

/** The pin workflow's state for this request's ID, or 'NONE' when there never was one. */
async function pinWorkflowState(user: TestUser, cid: string): Promise<string> {
  try {
    return (await api.deps.temporal.client.workflow.getHandle(pinJob.workflowId({ cid, userId: user.userId })).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NONE';
    throw err;
  }
}

test('a pin of content Kubo has is pinned by the request itself, with no workflow; a pin made again after a delete is a new request', async () => {
  const text = `local ${Date.now()}`;
  const cid = (await kubo().add(Buffer.from(text), { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
  const first = await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid, name: 'here' } });
  expect(first.status).toBe(202);
  expect(first.body).toMatchObject({ cid, name: 'here', status: 'pinned', size: text.length, pinnedAt: expect.any(Number), error: null });
  expect(await clusterStatuses(cid)).toEqual(['pinned']);
  expect(await pinWorkflowState(alice, cid)).toBe('NONE');
  const record = await api.deps.db.pins.get(`${alice.userId}:${parseCid(cid).multihash}`);
  expect(record).toMatchObject({ requestId: first.body.requestId, status: 'pinned', size: text.length });
  expect((await api.deps.db.usage.holding(alice.userId, parseCid(cid).multihash))?.pin).toBe(1);

  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: alice.apiKey })).status).toBe(200);
  await untilUnpinnedInCluster(cid);
  const second = await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid } });
  expect(second.status).toBe(202);
  expect(second.body).toMatchObject({ status: 'pinned' });
  expect(second.body.requestId).not.toBe(first.body.requestId);
  expect((await pinStatus(alice, cid)).body).toMatchObject({ requestId: second.body.requestId, status: 'pinned' });
  expect((await api.deps.db.holds.of(parseCid(cid).multihash)).holders).toEqual([`pin:${second.body.requestId}`]);
  expect(await clusterStatuses(cid)).toEqual(['pinned']);
  expect(await pinWorkflowState(alice, cid)).toBe('NONE');
});

test('POSTs of the same content at once make one request, pinned and counted once', async () => {
  const dave = await createUser(api);
  const text = `raced ${Date.now()}`;
  const cid = (await kubo().add(Buffer.from(text), { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
  // The first makes the request and pins it inline; the others find it queued and start its
  // workflow, which races the inline pin to complete it.
  const answers = await Promise.all(Array.from({ length: 8 }, () => call(api, 'POST', '/pin', { key: dave.apiKey, body: { cid } })));
  for (const a of answers) expect(a.status).toBe(202);
  expect(new Set(answers.map((a) => a.body.requestId)).size).toBe(1);
  await untilPinned(dave, cid);
  if ((await pinWorkflowState(dave, cid)) !== 'NONE')
    await api.deps.temporal.client.workflow.getHandle(pinJob.workflowId({ cid, userId: dave.userId })).result();
  expect(await api.deps.db.pins.model.countDocuments({ userId: dave.userId })).toBe(1);
  await eventually(
    () => api.deps.db.usage.used(dave.userId),
    (v) => v === text.length,
    10_000,
    'pin counted in usage',
  );
  expect((await api.deps.db.usage.holding(dave.userId, parseCid(cid).multihash))?.pin).toBe(1);
  expect(await api.deps.db.usage.used(dave.userId)).toBe(text.length);
});

test('when the API cannot pin local content itself (Cluster unreachable from it), the workflow does, in one workflow task', async () => {
  const cid = (await kubo().add(Buffer.from(`handed over ${Date.now()}`), { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
  const blind = await startTestApi({ TEMPORAL_TASK_QUEUE: queue, CLUSTER_API_URL: `http://127.0.0.1:${await freePort()}` });
  try {
    const res = await call(blind, 'POST', '/pin', { key: alice.apiKey, body: { cid } });
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('queued');
  } finally {
    await blind.close();
  }
  await untilPinned(alice, cid);
  expect(await clusterStatuses(cid)).toEqual(['pinned']);
  const handle = api.deps.temporal.client.workflow.getHandle(pinJob.workflowId({ cid, userId: alice.userId }));
  await handle.result();
  const events = (await handle.fetchHistory()).events ?? [];
  const { EventType } = proto.temporal.api.enums.v1; // a CommonJS module: no named ESM exports
  const count = (type: number) => events.filter((e) => e.eventType === type).length;
  // A local activity leaves a marker; there is no activity task and no second workflow task,
  // and one step both pinned the content and marked the request pinned.
  expect(count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)).toBe(0);
  expect(count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)).toBe(1);
  expect(count(EventType.EVENT_TYPE_MARKER_RECORDED)).toBe(1);
  expect((await api.deps.db.usage.holding(alice.userId, parseCid(cid).multihash))?.pin).toBe(1);
});

test('unpin leaves the cluster only when nobody holds the content', async () => {
  const cid = await remoteContent('shared-by-two', 1000);
  const origins = [second.node.swarmAddress];
  for (const u of [alice, bob]) expect((await call(api, 'POST', '/pin', { key: u.apiKey, body: { cid, origins } })).status).toBe(202);
  for (const u of [alice, bob]) await untilPinned(u, cid);

  // Another user's pin is 404, to read and to delete.
  const carol = await createUser(api);
  expect((await pinStatus(carol, cid)).status).toBe(404);
  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: carol.apiKey })).status).toBe(404);

  const del = await call(api, 'DELETE', `/pins/${cid}`, { key: alice.apiKey });
  expect(del.status).toBe(200);
  expect(del.body).toEqual({ success: true, cid });
  expect((await pinStatus(alice, cid)).status).toBe(404);
  // Bob still holds it: once the round for Alice's delete has run, it is still pinned.
  await syncRoundsDone(api.deps.temporal.client, cid);
  expect(await clusterStatuses(cid)).toEqual(['pinned']);

  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: bob.apiKey })).status).toBe(200);
  await untilUnpinnedInCluster(cid);
  expect((await api.deps.db.holds.of(parseCid(cid).multihash)).holders).toEqual([]);
  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: bob.apiKey })).status).toBe(404);
});

test("deleting a pin also removes the caller's file of that CID", async () => {
  const up = await call(api, 'POST', '/upload/new', { key: alice.apiKey, body: { content: 'file and pin' } });
  const cid = up.body.cid;
  await call(api, 'POST', '/pin', { key: alice.apiKey, body: { cid } });
  await untilPinned(alice, cid);
  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: alice.apiKey })).status).toBe(200);
  expect((await call(api, 'GET', `/file/${cid}`, { key: alice.apiKey })).status).toBe(404);
  await untilUnpinnedInCluster(cid);
});

test('Temporal down: content Kubo has is pinned all the same; other content is 503, and asking again once it is back resumes the same request', async () => {
  const local = (await kubo().add(Buffer.from(`while temporal was away ${Date.now()}`), { pin: false })).cid.toString();
  const cid = await remoteContent('while-temporal-was-away', 2000);
  const origins = [second.node.swarmAddress];
  const dead = await startTestApi({ TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`, LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent' });
  try {
    const here = await call(dead, 'POST', '/pin', { key: bob.apiKey, body: { cid: local } });
    expect(here.status).toBe(202);
    expect(here.body.status).toBe('pinned');
    expect(await clusterStatuses(parseCid(local).v1)).toEqual(['pinned']);

    const res = await call(dead, 'POST', '/pin', { key: bob.apiKey, body: { cid, origins } });
    expect(res.status).toBe(503);
    expect(errorReason(res)).toBe('DEPENDENCY_UNAVAILABLE');
    expect(res.body.error.details).toMatch(/temporal/);
    expect(res.headers.get('retry-after')).toBe('5');
  } finally {
    await dead.close();
  }
  const stuck = await pinStatus(bob, cid);
  expect(stuck.body.status).toBe('queued');
  const again = await call(api, 'POST', '/pin', { key: bob.apiKey, body: { cid, origins } });
  expect(again.body.requestId).toBe(stuck.body.requestId);
  await untilPinned(bob, cid);
  // Its workflow pinned it (it marks the request a moment before it completes).
  expect(await api.deps.temporal.client.workflow.getHandle(pinJob.workflowId({ cid, userId: bob.userId })).result()).toBe('pinned');
}, 90_000);

describe('bad pin requests are 4xx and write nothing', () => {
  test.each([
    [{ cid: 'not-a-cid' }, 'INVALID_CID'],
    [{ cid: 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e', origins: ['/ip4/1.2.3.4/tcp/4001'] }, 'INVALID_INPUT'],
    [{ cid: 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e', origins: ['not a multiaddr'] }, 'INVALID_INPUT'],
    [{ cid: 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e', origins: 'x' }, 'INVALID_INPUT'],
    [{ cid: 42 }, 'INVALID_INPUT'],
    [{}, 'INVALID_INPUT'],
  ])('%j → %s', async (body, reason) => {
    const before = await api.deps.db.pins.model.countDocuments({ userId: bob.userId });
    const res = await call(api, 'POST', '/pin', { key: bob.apiKey, body });
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe(reason);
    expect(await api.deps.db.pins.model.countDocuments({ userId: bob.userId })).toBe(before);
  });

  test('an invalid CID in the path is 400; an unknown one is 404', async () => {
    const bad = await call(api, 'GET', '/pin/xyz', { key: bob.apiKey });
    expect(bad.status).toBe(400);
    expect(errorReason(bad)).toBe('INVALID_CID');
    const unknown = await call(api, 'GET', '/pin/bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e', { key: bob.apiKey });
    expect(unknown.status).toBe(404);
  });
});
