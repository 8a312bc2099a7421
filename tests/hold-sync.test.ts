// Holds are made good in Cluster inline (core/hold-sync.ts): an upload is in Cluster's pin set
// when it is answered and starts no workflow; a delete is out of it when answered, or stays in
// it while another record holds the content, also without a workflow; a record gone by the time
// its pin lands is unpinned by its pinner; with Cluster unreachable the change falls back to its
// sync workflow; the change log's appends share writes and each is stored when its caller goes on.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { createClusterClient } from '../infra/ipfs/cluster.js';
import { newFileId } from '../infra/db/files.js';
import { announceHoldChange } from '../core/hold-sync.js';
import { syncJob } from '../infra/temporal/contracts/holds.js';
import { call, createUser, startTestApi, type TestUser } from './support/stack.js';
import { cluster, kubo } from './support/content.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  user = await createUser(api);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const inPinSet = async (cid: string) => (await cluster().allocation(cid))?.metadata?.service === 'stupa';

async function syncWorkflowStatus(cid: string): Promise<string> {
  try {
    const handle = api.deps.temporal.client.workflow.getHandle(syncJob.workflowId({ multihash: parseCid(cid).multihash }));
    return (await handle.describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NONE';
    throw err;
  }
}

test('an upload is in Cluster when it is answered, without a sync workflow; its change is logged', async () => {
  const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `inline ${Date.now()} ${Math.random()}` } });
  expect(res.status).toBe(201);
  expect(await inPinSet(res.body.cid)).toBe(true);
  expect(await syncWorkflowStatus(res.body.cid)).toBe('NONE');
  expect(await api.deps.db.holdChanges.model.countDocuments({ multihash: parseCid(res.body.cid).multihash })).toBe(1);
});

test('a delete leaves Cluster when answered, without a sync workflow, unless another record holds the content', async () => {
  const content = `deleted inline ${Date.now()} ${Math.random()}`;
  const first = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: 'a.txt' } });
  const second = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: 'b.txt' } });
  expect([second.body.cid, second.body.id === first.body.id]).toEqual([first.body.cid, false]);
  const cid = first.body.cid as string;

  expect((await call(api, 'DELETE', `/files/${first.body.id}`, { key: user.apiKey })).status).toBe(200);
  expect(await inPinSet(cid)).toBe(true);
  expect((await call(api, 'DELETE', `/files/${second.body.id}`, { key: user.apiKey })).status).toBe(200);
  expect(await inPinSet(cid)).toBe(false);
  expect(await syncWorkflowStatus(cid)).toBe('NONE');
  // Both changes logged, for the sweep.
  expect(await api.deps.db.holdChanges.model.countDocuments({ multihash: parseCid(cid).multihash })).toBe(4);
});

test('a record gone by the time its pin lands is unpinned by its pinner, unless another record holds the content', async () => {
  const cid = parseCid(
    (await kubo().add(`gone ${Date.now()} ${Math.random()}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString(),
  );
  // An added record that no longer exists: as if deleted right after its write, before the pin.
  await announceHoldChange(api.deps, cid.multihash, cid.v1, { kind: 'file', key: newFileId(), userId: user.userId });
  expect(await inPinSet(cid.v1)).toBe(false);
  expect(await syncWorkflowStatus(cid.v1)).toBe('NONE');

  // The same, for content an upload holds: its pin stays.
  const held = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `held ${Date.now()} ${Math.random()}` } });
  const heldCid = parseCid(held.body.cid);
  await announceHoldChange(api.deps, heldCid.multihash, heldCid.v1, { kind: 'file', key: newFileId(), userId: user.userId });
  expect(await inPinSet(heldCid.v1)).toBe(true);
});

test('with Cluster unreachable, an added hold goes to its sync workflow, which pins it', async () => {
  const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `fallback ${Date.now()} ${Math.random()}` } });
  const cid = parseCid(res.body.cid);
  // Unpinned behind the service's back, then announced again with a Cluster that does not answer.
  await cluster().unpin(cid.v1);
  await eventually(
    () => inPinSet(cid.v1),
    (pinned) => !pinned,
    30_000,
    'unpinned',
  );
  const unreachable = { ...api.deps, cluster: createClusterClient('http://127.0.0.1:9') };
  await announceHoldChange(unreachable, cid.multihash, cid.v1, { kind: 'file', key: res.body.id, userId: user.userId });
  expect(await syncWorkflowStatus(cid.v1)).not.toBe('NONE');
  await syncRoundsDone(api.deps.temporal.client, cid.v1);
  expect(await inPinSet(cid.v1)).toBe(true);
});

test('reads of whether anything holds content, asked together, are one query, and content held by many records does not hide the rest', async () => {
  const owner = await createUser(api);
  const upload = (content: string, name: string) =>
    call(api, 'POST', '/upload/new', { key: owner.apiKey, body: { content, name } }).then((r) => parseCid(r.body.cid));
  const tag = `${Date.now()} ${Math.random()}`;
  // Held by 13 files: more than the batch of three takes rows (HELD_ROWS_PER_MULTIHASH each).
  const popular = await upload(`popular ${tag}`, 'p0.txt');
  for (let i = 1; i < 13; i++) await upload(`popular ${tag}`, `p${i}.txt`);
  const single = await upload(`single ${tag}`, 's.txt');
  const unheld = parseCid((await kubo().add(`unheld ${tag}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());

  const model = api.deps.db.files.model;
  const finds: number[] = [];
  const exists: string[] = [];
  const [find, exist] = [model.find, model.exists];
  model.find = ((filter: { multihash?: { $in?: string[] } }, ...rest: unknown[]) => {
    if (filter?.multihash?.$in) finds.push(filter.multihash.$in.length);
    return (find as (...args: unknown[]) => unknown).call(model, filter, ...rest);
  }) as typeof model.find;
  model.exists = ((filter: { multihash: string }) => {
    exists.push(filter.multihash);
    return (exist as (...args: unknown[]) => unknown).call(model, filter);
  }) as typeof model.exists;
  try {
    const held = await Promise.all([popular, single, unheld].map((c) => api.deps.db.holds.isHeld(c.multihash)));
    expect(held).toEqual([true, true, false]);
  } finally {
    [model.find, model.exists] = [find, exist];
  }
  expect(finds).toEqual([3]);
  // The 12 rows the query took may all be the popular content's: the others were asked alone.
  expect(exists).toContain(unheld.multihash);
  expect(exists).not.toContain(popular.multihash);
});

test('concurrent appends to the change log share writes, and each is stored once its append resolves', async () => {
  const model = api.deps.db.holdChanges.model;
  const tag = `group-${Date.now()}`;
  const inserts: number[] = [];
  const original = model.insertMany;
  model.insertMany = ((docs: unknown[], ...rest: unknown[]) => {
    inserts.push(docs.length);
    return (original as (...args: unknown[]) => unknown).call(model, docs, ...rest);
  }) as typeof model.insertMany;
  try {
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        await api.deps.db.holdChanges.append(`${tag}-${i}`, `cid-${i}`);
        // Stored by the time the append resolves.
        expect(await model.countDocuments({ multihash: `${tag}-${i}` })).toBe(1);
      }),
    );
  } finally {
    model.insertMany = original;
    // Not CIDs: the log is shared with the other test files' sweeps.
    await model.deleteMany({ multihash: { $in: Array.from({ length: 50 }, (_, i) => `${tag}-${i}`) } });
  }
  expect(inserts.reduce((a, b) => a + b, 0)).toBe(50);
  expect(inserts.length).toBeLessThan(50);
});
