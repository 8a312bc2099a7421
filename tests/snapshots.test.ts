// Folder snapshots: the directory CID equals what `ipfs add -r --hidden` of the same tree gives
// on the stack's Kubo (the unixfs-v1-2025 profile), at the HAMT boundary too; repeat requests
// find the same job or snapshot; a snapshot is a hold; a worker killed mid-build is survived.
import fs from 'node:fs';
import path from 'node:path';
import pLimit from 'p-limit';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { newFileId } from '../infra/db/files.js';
import { readStackFile } from '../stack/stack-file.js';
import { snapshotJob } from '../infra/temporal/contracts/snapshots.js';
import { addTree, bytes, cluster, collect, kubo, MiB, multipart, postStream } from './support/content.js';
import { call, createUser, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
let api: ApiServer;
let worker: WorkerProcess;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
});
afterAll(async () => {
  // What directFiles wrote goes again, records first, then their Cluster pins (so the sweep
  // finds nothing to repair): later test files share this database, and on FerretDB every
  // scan (an upload's storage total, an unpin decision) reads all of it.
  await api?.deps.db.files.model.deleteMany({ userId: { $in: [...written.keys()] } }).exec();
  const limit = pLimit(8);
  await Promise.all([...written.values()].flat().map((cid) => limit(() => cluster().unpin(cid))));
  await Promise.all([api?.close(), worker?.kill()]);
});

/** The users whose file records directFiles wrote, with the CIDs it pinned. */
const written = new Map<string, string[]>();

const mkdir = async (user: TestUser, name: string, parentFolderId?: string) =>
  (await call(api, 'POST', '/folders', { key: user.apiKey, body: { name, parentFolderId } })).body.folderId as string;

/** Asks for the snapshot and waits until it is complete; returns the last status answer. */
async function snapshot(user: TestUser, folderId: string) {
  const started = await call(api, 'POST', `/folders/${folderId}/snapshot`, { key: user.apiKey });
  expect([200, 202]).toContain(started.status);
  return eventually(
    () => call(api, 'GET', `/folders/${folderId}/snapshot`, { key: user.apiKey }),
    (r) => r.body.status === 'complete',
    120_000,
    'snapshot complete',
  );
}

const pinnedInKubo = async (cid: string) => {
  for await (const pin of kubo().pin.ls({ type: 'recursive' })) if (parseCid(pin.cid.toString()).v1 === cid) return true;
  return false;
};
const inCluster = async (cid: string) => (await cluster().allocations()).some((a) => a.cid === cid);

/**
 * Files whose records are written directly (their bytes added to Kubo first), in a folder:
 * thousands of uploads through the API would take minutes. Each is pinned in Cluster as the
 * sync workflow would, so the holds and Cluster agree and the sweep has nothing to repair.
 */
async function directFiles(user: TestUser, folderId: string, dir: string, names: string[], content: (i: number) => string) {
  fs.mkdirSync(dir, { recursive: true });
  const now = Date.now();
  const pinning: Promise<void>[] = [];
  const limit = pLimit(8);
  for (const [i, name] of names.entries()) {
    const data = Buffer.from(content(i));
    fs.writeFileSync(path.join(dir, name), data);
    const cid = parseCid((await kubo().add(data, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
    await api.deps.db.files.insert({
      _id: newFileId(),
      userId: user.userId,
      cid: cid.v1,
      multihash: cid.multihash,
      name,
      description: null,
      size: data.length,
      mimeType: 'text/plain',
      folderId,
      metadata: {},
      createdAt: now + i,
      updatedAt: now + i,
    });
    written.set(user.userId, [...(written.get(user.userId) ?? []), cid.v1]);
    pinning.push(limit(() => cluster().pin(cid.v1, { metadata: { service: 'stupa' } })));
  }
  await Promise.all(pinning);
}

test('a nested tree (unicode, empty folder, dotfile, 0-byte and multi-block files) snapshots to the CID of ipfs add -r', async () => {
  const user = await createUser(api);
  const disk = tempDir('stupa-snap-');
  const root = await mkdir(user, 'site');
  const sub = await mkdir(user, 'sub', root);
  const deeper = await mkdir(user, 'deeper', sub);
  await mkdir(user, 'empty', root);
  const uni = await mkdir(user, 'ünïcødé 📁', root);
  for (const d of ['sub/deeper', 'empty', 'ünïcødé 📁']) fs.mkdirSync(path.join(disk, d), { recursive: true });

  const files: [string, string, string][] = [
    [root, 'index.html', '<h1>hello</h1>'],
    [root, '.hidden', 'dot'],
    [root, 'zero.bin', ''],
    [root, 'B.txt', 'capital'],
    [sub, 'a.txt', 'in sub'],
    [deeper, 'x', 'deep'],
    [uni, 'é.txt', 'accent'],
  ];
  const where = new Map([
    [root, ''],
    [sub, 'sub'],
    [deeper, 'sub/deeper'],
    [uni, 'ünïcødé 📁'],
  ]);
  for (const [folderId, name, content] of files as [string, string, string][]) {
    const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name, folderId } });
    expect(res.status).toBe(201);
    fs.writeFileSync(path.join(disk, where.get(folderId)!, name), content);
  }
  // 3 MiB + 1: several blocks, streamed as multipart into a subfolder.
  const big = await collect(bytes(3 * MiB + 1, 'snapshot-big'));
  fs.writeFileSync(path.join(disk, 'sub', 'big.bin'), big);
  const form = multipart({ folderId: sub }, { name: 'big.bin', source: bytes(3 * MiB + 1, 'snapshot-big') });
  const uploaded = await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body);
  expect(uploaded.status).toBe(201);
  // The upload kept the DAG size the directory links it with: Kubo's cumulative size.
  const bigRecord = (await api.deps.db.files.model.findOne({ userId: user.userId, cid: uploaded.body.cid }).lean().exec())!;
  const stat = await kubo().files.stat(`/ipfs/${uploaded.body.cid}`);
  expect(bigRecord.dagSize).toBe(Number(stat.cumulativeSize));
  expect(bigRecord.dagSize).toBeGreaterThan(3 * MiB + 1);
  // A record from before sizes were kept: the snapshot reads the size from the root block.
  await api.deps.db.files.model.updateOne({ _id: bigRecord._id }, { $unset: { dagSize: 1 } }).exec();

  const expected = await addTree(disk);
  const done = await snapshot(user, root);
  expect(done.body).toEqual({
    id: expect.stringMatching(new RegExp(`^${root}:[0-9a-f]{32}$`)),
    folderId: root,
    status: 'complete',
    progress: { linked: 8, total: 8 },
    snapshot: { cid: expected, takenAt: expect.any(Number), fileCount: 8, totalSize: 3 * MiB + 1 + 14 + 3 + 0 + 7 + 6 + 4 + 6 },
  });
  expect(await inCluster(expected)).toBe(true);

  // Asking again for the unchanged folder finds the same snapshot: no second job.
  const key = { folderId: root, digest: done.body.id.split(':')[1] };
  const runBefore = (await api.deps.temporal.client.workflow.getHandle(snapshotJob.workflowId(key)).describe()).runId;
  const again = await call(api, 'POST', `/folders/${root}/snapshot`, { key: user.apiKey });
  expect(again.status).toBe(200);
  expect(again.body.snapshot).toEqual(done.body.snapshot);
  expect((await api.deps.temporal.client.workflow.getHandle(snapshotJob.workflowId(key)).describe()).runId).toBe(runBefore);

  const listed = await call(api, 'GET', `/folders/${root}/snapshots`, { key: user.apiKey });
  expect(listed.body).toEqual({ items: [done.body.snapshot], nextCursor: null });
  expect((await call(api, 'GET', `/folders/${root}`, { key: user.apiKey })).body.latestSnapshot).toEqual({
    cid: expected,
    takenAt: done.body.snapshot.takenAt,
    fileCount: 8,
  });

  // A snapshot is a hold: with every file deleted its directory stays pinned, until it is deleted.
  for (const item of (await call(api, 'GET', '/upload/list?limit=100', { key: user.apiKey })).body.items) {
    expect((await call(api, 'DELETE', `/pin/${item.cid}`, { key: user.apiKey })).status).toBe(200);
  }
  await syncRoundsDone(api.deps.temporal.client, expected);
  expect(await inCluster(expected)).toBe(true);
  const del = await call(api, 'DELETE', `/folders/${root}/snapshots/${expected}`, { key: user.apiKey });
  expect(del.body).toEqual({ success: true, cid: expected });
  await syncRoundsDone(api.deps.temporal.client, expected);
  expect(await inCluster(expected)).toBe(false);
  // Nor does Kubo keep the pin the directory's import made: Cluster's unpin was that pin.
  expect(await pinnedInKubo(expected)).toBe(false);
  expect((await call(api, 'DELETE', `/folders/${root}/snapshots/${expected}`, { key: user.apiKey })).status).toBe(404);
}, 180_000);

test('the status names the job last asked for; the listing kept for a job goes with it; a job whose folder changed unkept ends "changed"', async () => {
  const user = await createUser(api);
  const folder = await mkdir(user, 'status');
  const status = () => call(api, 'GET', `/folders/${folder}/snapshot`, { key: user.apiKey });
  expect((await status()).body).toEqual({ id: null, folderId: folder, status: 'none', progress: null, snapshot: null });

  const upload = (content: string) =>
    call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: `${content}.txt`, folderId: folder } });
  expect((await upload('one')).status).toBe(201);
  const first = await snapshot(user, folder);
  // The job's listing was dropped once it was built.
  expect(await api.deps.db.snapshotListings.model.countDocuments({ folderId: folder }).exec()).toBe(0);

  // The folder changes: the status still shows the job asked for, and its snapshot.
  expect((await upload('two')).status).toBe(201);
  expect((await status()).body).toEqual(first.body);
  const second = await snapshot(user, folder);
  expect(second.body.id).not.toBe(first.body.id);
  expect(second.body.snapshot.cid).not.toBe(first.body.snapshot.cid);
  expect(second.body.snapshot.fileCount).toBe(2);
  expect((await status()).body).toEqual(second.body);

  // A job whose listing was not kept lists the folder itself; a folder that no longer has the
  // listing's digest ends the job without a snapshot.
  const stale = { userId: user.userId, folderId: folder, digest: '0'.repeat(32) };
  await api.deps.jobs.start(snapshotJob, stale);
  expect(await api.deps.temporal.client.workflow.getHandle(snapshotJob.workflowId(stale)).result()).toEqual({ status: 'changed' });
  expect((await call(api, 'GET', `/folders/${folder}/snapshots`, { key: user.apiKey })).body.items).toHaveLength(2);
}, 120_000);

test('at the HAMT boundary (a 262,144-byte directory block) the CIDs equal ipfs add -r on both sides', async () => {
  // Links of 242 bytes each (36-byte CID, 196-byte name, sizes under 128) plus the 4 bytes of
  // the directory's data: 1083 links make a 262,090-byte block, 1084 make 262,332: a HAMT.
  const pad = 'p'.repeat(190);
  for (const [n, plainBlock] of [
    [1083, true],
    [1084, false],
  ] as const) {
    const user = await createUser(api);
    const folder = await mkdir(user, `flat-${n}`);
    const disk = tempDir(`stupa-hamt-${n}-`);
    const names = Array.from({ length: n }, (_, i) => `${String(i).padStart(6, '0')}${pad}`);
    await directFiles(user, folder, disk, names, (i) => `hamt ${n} file ${i}`);
    const expected = await addTree(disk);
    const done = await snapshot(user, folder);
    expect({ n, cid: done.body.snapshot.cid }).toEqual({ n, cid: expected });
    const { size } = await kubo().block.stat(parseCid(expected).cid);
    expect({ n, plainBlock: size === 4 + 242 * n }).toEqual({ n, plainBlock });
  }
}, 300_000);

test('a worker killed mid-snapshot is replaced, and the new one finishes the same directory', async () => {
  // Kubo is paused while the job runs, so the worker is killed with the directory built and
  // being stored; the replacement builds and stores it again once Kubo is back.
  const user = await createUser(api);
  const folder = await mkdir(user, 'many');
  const sub = await mkdir(user, 'sub', folder);
  const disk = tempDir('stupa-kill-');
  const names = Array.from({ length: 500 }, (_, i) => `file-${i}.txt`);
  await directFiles(user, folder, disk, names, (i) => `killed ${i}`);
  await directFiles(user, sub, path.join(disk, 'sub'), names, (i) => `killed sub ${i}`);
  const expected = await addTree(disk);

  const kuboPid = readStackFile(process.env.STUPA_TEST_DATA_DIR!).pids!.kubo!;
  process.kill(kuboPid, 'SIGSTOP');
  try {
    expect((await call(api, 'POST', `/folders/${folder}/snapshot`, { key: user.apiKey })).status).toBe(202);
    const midway = await eventually(
      () => call(api, 'GET', `/folders/${folder}/snapshot`, { key: user.apiKey }),
      (r) => r.body.progress?.linked === 1000,
      60_000,
      'snapshot built',
    );
    expect(midway.body.status).toBe('running');
    await worker.kill('SIGKILL');
  } finally {
    process.kill(kuboPid, 'SIGCONT');
  }
  worker = await startWorkerProcess(env);
  const done = await eventually(
    () => call(api, 'GET', `/folders/${folder}/snapshot`, { key: user.apiKey }),
    (r) => r.body.status === 'complete',
    120_000,
    'snapshot complete after the restart',
  );
  expect(done.body.snapshot).toMatchObject({ cid: expected, fileCount: 1000 });
}, 240_000);
