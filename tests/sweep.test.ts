// The sweep is incremental: it checks only the content whose holds changed since its watermark
// (the change log every change writes before its signal), so a change whose signal never went
// out is repaired by one round, and a round with nothing changed signals nothing. The full
// comparison is the audit's (`npm run admin -- check --repair`, tests/audit.test.ts).
import type { ApiServer } from '../api/server.js';
import { recountLater } from '../core/content.js';
import { parseCid, type ParsedCid } from '../infra/ipfs/cid.js';
import { COUNT_CHECK_AFTER_MS, HOLD_CHANGE_SETTLE_MS, PIN_STALLED_MS } from '../infra/constants.js';
import { userContentKey } from '../infra/db/by-id.js';
import { newFileId, type FileRecord } from '../infra/db/files.js';
import { sweepJob, type SweepResult } from '../infra/temporal/contracts/sweep.js';
import { openDatabase } from '../infra/db/index.js';
import { createPinSteps } from '../core/pin-steps.js';
import { call, createUser, stack, startTestApi, type TestUser } from './support/stack.js';
import { cluster, kubo } from './support/content.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

const queue = testTaskQueue();
let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;

const schedule = () => api.deps.temporal.client.schedule.getHandle(sweepJob.scheduleId(queue));

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  user = await createUser(api);
  // The worker's own schedule would run rounds between this file's; the tests run them.
  await schedule().pause('tests/sweep.test.ts runs the rounds itself');
});
afterAll(async () => {
  await schedule()
    .unpause()
    .catch(() => undefined);
  await Promise.all([api?.close(), worker?.kill()]);
});

/** One round of the sweep workflow, run by the worker as the schedule runs it. */
const sweepRound = (): Promise<SweepResult> =>
  api.deps.temporal.client.workflow.execute(sweepJob.workflowType, { taskQueue: queue, workflowId: `sweep-test-${Date.now()}` });

/** Waits until changes logged up to now are old enough for a round to check. */
const settle = () => new Promise((r) => setTimeout(r, HOLD_CHANGE_SETTLE_MS + 300));

const pinnedInCluster = async (cid: string) => (await cluster().allocation(cid)) !== null;

/** Content in Kubo, not pinned. */
async function freshContent(label: string): Promise<ParsedCid> {
  return parseCid((await kubo().add(Buffer.from(`${label} ${Date.now()} ${Math.random()}`), { pin: false })).cid.toString());
}

/** A file record written as the use-case writes it, but with no signal: as if Temporal were down. */
async function fileWithoutSignal(cid: ParsedCid): Promise<FileRecord> {
  const now = Date.now();
  const file: FileRecord = {
    _id: newFileId(),
    userId: user.userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: 'unsignalled',
    description: null,
    size: 10,
    mimeType: 'text/plain',
    folderId: null,
    metadata: {},
    createdAt: now,
    updatedAt: now,
  };
  await api.deps.db.files.insert(file);
  return file;
}

test('every change is logged before it is signalled', async () => {
  const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `logged ${Date.now()}` } });
  expect(res.status).toBe(201);
  const { multihash } = parseCid(res.body.cid);
  expect(await api.deps.db.holdChanges.model.countDocuments({ multihash })).toBe(1);
  expect((await call(api, 'DELETE', `/pin/${res.body.cid}`, { key: user.apiKey })).status).toBe(200);
  expect(await api.deps.db.holdChanges.model.countDocuments({ multihash })).toBe(2);
});

test('a hold whose signal never went out is pinned after one round; a round with nothing changed signals nothing', async () => {
  const cid = await freshContent('unsignalled hold');
  await fileWithoutSignal(cid);
  // An entry that is not a CID (a bug's, or typed by hand) must not stop the round.
  await api.deps.db.holdChanges.append(`not-a-multihash-${Date.now()}`, 'not-a-cid');
  await api.deps.db.holdChanges.append(cid.multihash, cid.v1); // logged; the signal is "lost"
  const logged = Date.now();
  expect(await pinnedInCluster(cid.v1)).toBe(false);

  await settle();
  const round = await sweepRound();
  expect(round.resynced).toBeGreaterThanOrEqual(1);
  expect(round.checked).toBeGreaterThanOrEqual(round.resynced);
  await eventually(() => pinnedInCluster(cid.v1), Boolean, 30_000, 'pinned by the sweep');
  // The watermark passed the change.
  expect(await api.deps.db.holdChanges.watermark()).toBeGreaterThanOrEqual(logged);

  // The next round looks back over the last two minutes again (HOLD_CHANGE_RECHECK_MS: what a
  // crashed Cluster forgot), finds them in step, and signals nothing.
  const idle = await sweepRound();
  expect(idle.checked).toBeGreaterThanOrEqual(1);
  expect(idle.resynced).toBe(0);
}, 60_000);

test('a removed hold whose signal never went out is unpinned after one round', async () => {
  const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `to be dropped ${Date.now()}` } });
  const cid = parseCid(res.body.cid);
  await syncRoundsDone(api.deps.temporal.client, cid.v1);
  await eventually(() => pinnedInCluster(cid.v1), Boolean, 30_000, 'pinned after upload');

  expect(await api.deps.db.files.delete(res.body.id)).not.toBeNull();
  await api.deps.db.usage.release(user.userId, cid.multihash, 'file'); // counted, as a delete does
  await api.deps.db.holdChanges.append(cid.multihash, cid.v1);
  const before = await api.deps.db.holdChanges.watermark();
  await settle();
  const round = await sweepRound();
  expect(round.resynced).toBeGreaterThanOrEqual(1);
  expect(await api.deps.db.holdChanges.watermark()).toBeGreaterThan(before);
  await eventually(
    () => pinnedInCluster(cid.v1),
    (v) => v === false,
    30_000,
    'unpinned by the sweep',
  );
}, 60_000);

test('a change that was never logged is left alone by the sweep (the audit finds it: tests/audit.test.ts)', async () => {
  const cid = await freshContent('unlogged hold');
  await fileWithoutSignal(cid); // neither logged nor signalled: only the audit's full comparison sees it
  await settle();
  await sweepRound();
  expect(await pinnedInCluster(cid.v1)).toBe(false);
});

test('counters a killed request left behind: the round that finds its change settled recounts the user and sets the folder count; a change marked recount, or logged by a process that died before it settled, recounts its user', async () => {
  const broken = await createUser(api);
  const folderId = (await call(api, 'POST', '/folders', { key: broken.apiKey, body: { name: 'counted' } })).body.folderId as string;
  const uploaded = await call(api, 'POST', '/upload/new', { key: broken.apiKey, body: { content: `died ${Date.now()}`, folderId } });
  expect(uploaded.status).toBe(201);
  // Another user's upload at the same moment, whose counters are right.
  expect((await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `lived ${Date.now()}` } })).status).toBe(201);
  // And one whose process died between its holding document and the user's counters: the
  // holding is right and says it was still settling.
  const halfway = await createUser(api);
  const halfwayUpload = await call(api, 'POST', '/upload/new', { key: halfway.apiKey, body: { content: `halfway ${Date.now()}` } });
  const halfwaySize = halfwayUpload.body.size as number;
  // What an API process killed between the record and its counters leaves (its change was
  // logged before the record): the holding and the folder one file short.
  const { db } = api.deps;
  const size = uploaded.body.size as number;
  await db.usage.release(broken.userId, parseCid(uploaded.body.cid).multihash, 'file');
  await db.folders.adjustFileCount(folderId, -1);
  expect(await db.usage.used(broken.userId)).toBe(0);
  const halfwayHolding = userContentKey(halfway.userId, parseCid(halfwayUpload.body.cid).multihash);
  await db.usage.holds.updateOne({ _id: halfwayHolding }, { $inc: { settling: 1 } }).exec();
  await db.usage.add(halfway.userId, { files: -halfwaySize });
  expect(await db.usage.used(halfway.userId)).toBe(0);
  // And one whose reservation's answer was lost (applied after all), so it asked for a recount:
  // its counter is 42 bytes high, which no holding shows.
  const leaked = await createUser(api);
  const leakedUpload = await call(api, 'POST', '/upload/new', { key: leaked.apiKey, body: { content: `leaked ${Date.now()}` } });
  await db.usage.add(leaked.userId, { used: 42 });
  recountLater(db, leaked.userId, parseCid(leakedUpload.body.cid));
  // And an API process killed between its reservation and its record: another process with its
  // own connection, beating, logs its change and reserves as an upload does, then its connection
  // goes (no last beat, no record, no give-back). The reservation shows in no holding.
  const cut = await createUser(api);
  const cutUpload = await call(api, 'POST', '/upload/new', { key: cut.apiKey, body: { content: `cut ${Date.now()}` } });
  const dying = await openDatabase(stack.mongodbUri);
  const stopBeating = await dying.processes.startBeating('api');
  const cutCid = await freshContent('cut');
  await dying.holdChanges.append(cutCid.multihash, cutCid.v1, { userId: cut.userId });
  expect(await dying.usage.reserve(cut.userId, 4242, Number.MAX_SAFE_INTEGER)).toBe(cutUpload.body.size + 4242);
  await dying.connection.close();
  await stopBeating(); // its last beat fails: the connection is gone
  expect(await db.usage.used(cut.userId)).toBe(cutUpload.body.size + 4242);

  // Checked once COUNT_CHECK_AFTER_MS old.
  await new Promise((r) => setTimeout(r, COUNT_CHECK_AFTER_MS + HOLD_CHANGE_SETTLE_MS + 500));
  const round = await sweepRound();
  expect(round.countsChecked).toBeGreaterThanOrEqual(4); // three holdings and the folder
  // These four users at least. Not exactly four: the round takes every settled change in the
  // stack's database, and another test file's process killed mid-request may have left one too
  // (seen once in CI: 5). Each repair is checked exactly below.
  expect(round.recounted).toBeGreaterThanOrEqual(4);
  expect(round.foldersSet).toBe(1);
  expect(await db.usage.used(broken.userId)).toBe(size);
  expect(await db.usage.holdingsAgree([{ userId: broken.userId, multihash: parseCid(uploaded.body.cid).multihash }])).toEqual([true]);
  expect((await db.folders.findForUser(broken.userId, folderId))?.fileCount).toBe(1);
  expect(await db.usage.used(halfway.userId)).toBe(halfwaySize);
  expect((await db.usage.holds.findById(halfwayHolding).lean().exec())?.settling).toBe(0);
  expect(await db.usage.used(leaked.userId)).toBe(leakedUpload.body.size);
  expect(await db.usage.used(cut.userId)).toBe(cutUpload.body.size);

  // Checked once: the next round passes it by.
  const next = await sweepRound();
  expect(next.recounted).toBe(0);
}, 120_000);

test('a pin marked pinned by a step that died before counting it: the step run again counts nothing, and the sweep recounts the user from the change it logged', async () => {
  const pinner = await createUser(api);
  const cid = await freshContent('pinned, not counted');
  const pinned = await call(api, 'POST', '/pin', { key: pinner.apiKey, body: { cid: cid.v1 } });
  expect(pinned.body.status).toBe('pinned');
  const size = pinned.body.size as number;
  const { db } = api.deps;
  // What a step killed between marking the request pinned and counting it leaves.
  await db.usage.release(pinner.userId, cid.multihash, 'pin');
  expect(await db.usage.used(pinner.userId)).toBe(0);
  // Run again (the workflow's retry, or a second POST's workflow racing the first's inline pin):
  // the request is pinned already, so this run counts nothing.
  const key = userContentKey(pinner.userId, cid.multihash);
  const again = await createPinSteps(api.deps).completePin({
    key,
    requestId: pinned.body.requestId,
    size,
    cid: cid.v1,
    multihash: cid.multihash,
  });
  expect(again).toMatchObject({ requestId: pinned.body.requestId, status: 'pinned' });
  expect(await db.usage.used(pinner.userId)).toBe(0);

  await new Promise((r) => setTimeout(r, COUNT_CHECK_AFTER_MS + HOLD_CHANGE_SETTLE_MS + 500));
  const round = await sweepRound();
  expect(round.recounted).toBeGreaterThanOrEqual(1);
  expect(await db.usage.used(pinner.userId)).toBe(size);
  expect((await db.usage.holding(pinner.userId, cid.multihash))?.pin).toBe(1);
}, 120_000);

test('a pin request left queued with no workflow (its API process died pinning it inline) is started by the sweep once PIN_STALLED_MS old, and ends pinned and counted', async () => {
  const owner = await createUser(api);
  const cid = await freshContent('left queued');
  const at = Date.now() - PIN_STALLED_MS - 1_000;
  const key = userContentKey(owner.userId, cid.multihash);
  await api.deps.db.pins.createOrGet({
    _id: key,
    requestId: `pin_leftqueued${Date.now()}`,
    userId: owner.userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: null,
    description: null,
    origins: [],
    metadata: {},
    status: 'queued',
    error: null,
    size: null,
    createdAt: at,
    updatedAt: at,
    pinnedAt: null,
    deadline: Date.now() + 3_600_000,
  });
  const round = await sweepRound();
  expect(round.resumed).toBeGreaterThanOrEqual(1);
  const pinned = await eventually(
    () => api.deps.db.pins.get(key),
    (p) => p?.status === 'pinned',
    30_000,
    'pinned by the workflow the sweep started',
  );
  expect(pinned!.size).toBeGreaterThan(0);
  expect(await pinnedInCluster(cid.v1)).toBe(true);
  expect(await api.deps.db.usage.used(owner.userId)).toBe(pinned!.size);
});
