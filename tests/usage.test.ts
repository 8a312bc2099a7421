// Storage use is a per-user counter (infra/db/usage.ts): concurrent uploads of one account can
// neither pass the quota together nor be refused for one another, and every upload, replace,
// delete, pin and unpin leaves the counter equal to the sum of the user's records.
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { call, createUser, plansFile, startTestApi, type TestUser } from './support/stack.js';
import { USAGE_RECOUNT_QUIET_MS, USAGE_RECOUNT_SETTLE_MS } from '../infra/constants.js';
import { userContentKey } from '../infra/db/by-id.js';
import { newFileId } from '../infra/db/files.js';
import { contentPages, type ContentPage } from '../infra/db/usage-tally.js';
import { bytes, collect, kubo, MiB, multipart, postStream } from './support/content.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;

beforeAll(async () => {
  const env = {
    TEMPORAL_TASK_QUEUE: testTaskQueue(),
    // 1 MiB of storage, and no request rate in the way of the parallel uploads.
    PLANS_FILE: plansFile({ small: { storageMB: 1, requestsPerMinute: 100_000 }, dharma: { requestsPerMinute: 100_000 } }),
  };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

/** The user's bytes summed from the records, each distinct content once (a test's check, not
 * a request path): what the counter must equal. */
async function recounted(userId: string): Promise<number> {
  const { files, pins } = api.deps.db;
  type Row = { multihash: string; size: number };
  const [filed, pinned] = await Promise.all([
    files.model.find({ userId }, { multihash: 1, size: 1 }).lean<Row[]>().exec(),
    pins.model.find({ userId, status: 'pinned' }, { multihash: 1, size: 1 }).lean<Row[]>().exec(),
  ]);
  const sizes = new Map<string, number>();
  for (const r of [...filed, ...pinned]) sizes.set(r.multihash, Math.max(sizes.get(r.multihash) ?? 0, r.size ?? 0));
  return [...sizes.values()].reduce((a, b) => a + b, 0);
}

/** The counter, read from its document, and the records' sum: equal when the counter is exact. */
async function counterAndSum(userId: string) {
  const doc = await api.deps.db.usage.model.findById(userId).lean().exec();
  return { counter: doc?.used, files: doc?.files, pinned: doc?.pinned, sum: await recounted(userId) };
}

/** Asks for a pin of the content and waits until it is pinned. */
async function pinned(user: TestUser, cid: string): Promise<void> {
  expect((await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid } })).status).toBe(202);
  await eventually(
    () => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey }),
    (r) => r.body.status === 'pinned',
    30_000,
    'pinned',
  );
}

const upload = (user: TestUser, content: string, extra: Record<string, unknown> = {}) =>
  call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, ...extra } });

test('20 concurrent uploads to an account with room for exactly 7: 7 recorded, 13 refused with 402, none busy', async () => {
  const user = await createUser(api, 'small'); // 1 MiB
  const size = 140_000; // 7 × 140,000 = 980,000 ≤ 1,048,576 < 8 × 140,000
  const replies = await Promise.all(
    Array.from({ length: 20 }, (_, i) => upload(user, `${String(i).padStart(2, '0')}`.repeat(size / 2), { name: `f${i}` })),
  );
  const statuses = replies.map((r) => r.status).sort();
  expect(statuses.filter((s) => s === 201)).toHaveLength(7);
  expect(statuses.filter((s) => s === 402)).toHaveLength(13);
  expect(replies.filter((r) => r.status === 402).every((r) => r.body.error.reason === 'STORAGE_LIMIT')).toBe(true);

  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(7);
  expect(await counterAndSum(user.userId)).toEqual({ counter: 7 * size, files: 7 * size, pinned: 0, sum: 7 * size });
}, 120_000);

test('the same content uploaded 10 times at once under 10 names is 10 files, counted once; under one name, one file', async () => {
  const user = await createUser(api);
  const content = `same ${Date.now()} `.repeat(1000);
  const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => upload(user, content, { name: `copy ${i}` })));
  expect(replies.map((r) => r.status)).toEqual(Array(10).fill(201));
  expect(new Set(replies.map((r) => r.body.id)).size).toBe(10);
  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(10);
  expect(await counterAndSum(user.userId)).toEqual({ counter: content.length, files: content.length, pinned: 0, sum: content.length });
  // The holding document counts the ten records.
  const [hold] = await api.deps.db.usage.holds.find({ userId: user.userId }).lean().exec();
  expect(hold).toMatchObject({ file: 10, size: content.length, settling: 0 }); // every step's counters written

  // The same upload repeated at once (a client retrying) is one file.
  const retries = await Promise.all(Array.from({ length: 10 }, () => upload(user, content, { name: 'retried' })));
  expect(retries.map((r) => r.status)).toEqual(Array(10).fill(201));
  expect(new Set(retries.map((r) => r.body.id)).size).toBe(1);
  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(11);
  expect(await counterAndSum(user.userId)).toEqual({ counter: content.length, files: content.length, pinned: 0, sum: content.length });
}, 60_000);

test('replace, delete and recursive folder delete keep the counter equal to the records', async () => {
  const user = await createUser(api);
  const a = await upload(user, 'a'.repeat(1000));
  const again = await upload(user, 'a'.repeat(1000));
  expect([again.body.cid, again.body.id]).toEqual([a.body.cid, a.body.id]);
  expect(await counterAndSum(user.userId)).toMatchObject({ counter: 1000, sum: 1000 });

  const outer = await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: 'outer' } });
  const inner = await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: 'inner', parentFolderId: outer.body.folderId } });
  expect(inner.status).toBe(201);
  await upload(user, 'b'.repeat(2000), { folderId: outer.body.folderId });
  await upload(user, 'c'.repeat(3000), { folderId: inner.body.folderId });
  expect(await counterAndSum(user.userId)).toMatchObject({ counter: 6000, sum: 6000 });

  // A file deleted twice at once is given back once.
  const deletes = await Promise.all([1, 2].map(() => call(api, 'DELETE', `/pin/${a.body.cid}`, { key: user.apiKey })));
  expect(deletes.map((d) => d.status).sort()).toEqual(expect.arrayContaining([200]));
  expect(await counterAndSum(user.userId)).toMatchObject({ counter: 5000, sum: 5000 });

  expect((await call(api, 'DELETE', `/folders/${outer.body.folderId}?recursive=true`, { key: user.apiKey })).status).toBe(200);
  expect(await counterAndSum(user.userId)).toEqual({ counter: 0, files: 0, pinned: 0, sum: 0 });
}, 60_000);

test('a recount beside traffic: the writes that come during it wait for it, and the counter ends equal to the records', async () => {
  const user = await createUser(api);
  const first = await upload(user, 'first '.repeat(500));
  // What an API process killed between a record and its count leaves: the counters too low.
  await api.deps.db.usage.release(user.userId, parseCid(first.body.cid).multihash, 'file');
  expect((await counterAndSum(user.userId)).counter).toBe(0);

  const recount = api.deps.db.usage.recount(user.userId);
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // the recount has stopped new writes
  const started = Date.now();
  const writes = await Promise.all([
    ...Array.from({ length: 5 }, (_, i) => upload(user, `during ${i} `.repeat(300))),
    call(api, 'DELETE', `/files/${first.body.id}`, { key: user.apiKey }),
  ]);
  const recounted = await recount;
  expect(writes.map((w) => w.status)).toEqual([201, 201, 201, 201, 201, 200]);
  // They waited for the recount, until the counters stood still (USAGE_RECOUNT_QUIET_MS), not
  // the whole settle time, and were counted after it.
  const waited = Date.now() - started;
  expect(waited).toBeGreaterThan(USAGE_RECOUNT_QUIET_MS - 1_000);
  expect(waited).toBeLessThan(USAGE_RECOUNT_SETTLE_MS - 10_000);
  expect(recounted.used).toBe(3000); // the first file counted again, before the writes that waited
  const sum = writes.slice(0, 5).reduce((n, w) => n + w.body.size, 0);
  expect(await counterAndSum(user.userId)).toEqual({ counter: sum, files: sum, pinned: 0, sum });

  // A writer that reserved before the recount began and takes its holding step 2 s into it:
  // the recount waits for it and counts it.
  const content = await collect(bytes(777, `in flight ${Date.now()}`));
  const cid = parseCid((await kubo().add(content, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
  // Reserved as an upload reserves new content: its `used` and its `files` (answering `used` after it).
  expect(await api.deps.db.usage.reserve(user.userId, 777, 1e12, 777)).toBe(sum + 777);
  const second = api.deps.db.usage.recount(user.userId);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const now = Date.now();
  await api.deps.db.files.insert({
    _id: newFileId(),
    userId: user.userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: 'in flight',
    description: null,
    size: 777,
    mimeType: 'application/octet-stream',
    folderId: null,
    metadata: {},
    createdAt: now,
    updatedAt: now,
  });
  await api.deps.db.usage.hold(user.userId, cid.multihash, 'file', 777, { used: 777, files: 777 });
  expect((await second).used).toBe(sum + 777);
  expect(await counterAndSum(user.userId)).toEqual({ counter: sum + 777, files: sum + 777, pinned: 0, sum: sum + 777 });
}, 120_000);

test('a pin counts its size once pinned, and no longer once deleted', async () => {
  const user = await createUser(api);
  const content = await collect(bytes(50_000, `usage-pin-${Date.now()}`));
  const cid = (await kubo().add(content, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
  await pinned(user, cid);
  expect(await counterAndSum(user.userId)).toEqual({ counter: 50_000, files: 0, pinned: 50_000, sum: 50_000 });
  // What quota checks read.
  expect(await api.deps.db.usage.used(user.userId)).toBe(50_000);

  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: user.apiKey })).status).toBe(200);
  expect(await counterAndSum(user.userId)).toEqual({ counter: 0, files: 0, pinned: 0, sum: 0 });
}, 60_000);

test("a rebuild and the audit read a user's records a page of contents at a time: pages of 1 to 3 records count what one page does, and a holding document no record makes is found", async () => {
  const user = await createUser(api);
  // Nine files of one content (more than a page), six other contents, two of them pinned too,
  // and one content pinned only.
  const same = `same ${Date.now()}`;
  const twins = await Promise.all(Array.from({ length: 9 }, (_, i) => upload(user, same, { name: `same ${i}` })));
  const others = await Promise.all(Array.from({ length: 6 }, (_, i) => upload(user, `other ${i} ${Date.now()}`)));
  const pinOnly = (await kubo().add(`pinned only ${Date.now()}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
  await Promise.all([others[0]!.body.cid as string, others[1]!.body.cid as string, pinOnly].map((cid) => pinned(user, cid)));

  const { db } = api.deps;
  const pages = async (limit: number) => {
    const all: ContentPage[] = [];
    for await (const page of contentPages(db.userRecords, user.userId, limit)) all.push(page);
    return all;
  };
  const merged = (all: ContentPage[]) => Object.fromEntries(all.flatMap((p) => [...p.counted]).sort(([a], [b]) => a.localeCompare(b)));
  const whole = await pages(1000);
  expect(whole).toHaveLength(1);
  const counted = merged(whole);
  const key = (cid: string) => userContentKey(user.userId, parseCid(cid).multihash);
  expect(Object.keys(counted)).toHaveLength(8);
  expect(counted[key(twins[0]!.body.cid as string)]).toMatchObject({ file: 9, pin: 0, object: 0 });
  expect(counted[key(others[0]!.body.cid as string)]).toMatchObject({ file: 1, pin: 1, object: 0 });
  expect(counted[key(others[5]!.body.cid as string)]).toMatchObject({ file: 1, pin: 0, object: 0 });
  expect(counted[key(pinOnly)]).toMatchObject({ file: 0, pin: 1, object: 0 });
  for (const limit of [1, 2, 3]) {
    const paged = await pages(limit);
    expect(paged.length).toBeGreaterThan(2);
    expect(merged(paged)).toEqual(counted);
  }
  // The audit's comparison, paged the same way, finds the counters and holdings right.
  const compared = await db.usage.compare(user.userId);
  expect(compared?.stored).toEqual(compared?.fromRecords);
  expect(compared?.holdingsOff).toBe(0);
  // A holding document that counts a content no record holds is off; one that counts nothing is not.
  await db.usage.holds.create({ _id: userContentKey(user.userId, 'zz-gone'), userId: user.userId, file: 1, pin: 0, size: 5 });
  await db.usage.holds.create({ _id: userContentKey(user.userId, 'zz-empty'), userId: user.userId, file: 0, pin: 0, size: 5 });
  expect((await db.usage.compare(user.userId))?.holdingsOff).toBe(1);
}, 90_000);

test('a user from before counters is counted once from the records, however many requests ask at once', async () => {
  const user = await createUser(api);
  const small = await createUser(api, 'small');
  // Records written as an older version wrote them: no usage document.
  await api.deps.db.usage.model.deleteMany({ _id: { $in: [user.userId, small.userId] } }).exec();
  const now = Date.now();
  for (const [owner, size, seed] of [
    [user, 4000, 'one'],
    [user, 6000, 'two'],
    [small, MiB - 100, 'big'],
  ] as const) {
    const cid = parseCid((await kubo().add(Buffer.from(`${seed} ${now}`), { pin: false })).cid.toString());
    await api.deps.db.files.insert({
      _id: newFileId(),
      userId: owner.userId,
      cid: cid.v1,
      multihash: cid.multihash,
      name: seed,
      description: null,
      size,
      mimeType: 'text/plain',
      folderId: null,
      metadata: {},
      createdAt: now,
      updatedAt: now,
    });
  }
  const reads = await Promise.all(Array.from({ length: 10 }, () => api.deps.db.usage.used(user.userId)));
  expect(reads).toEqual(Array(10).fill(10_000));
  expect(await counterAndSum(user.userId)).toEqual({ counter: 10_000, files: 10_000, pinned: 0, sum: 10_000 });

  // The first upload of a user without a document is decided on the backfilled count.
  const form = multipart({}, { name: 'x', source: bytes(200, 'over') });
  const over = await postStream(`${api.url}/upload/new`, small.apiKey, form.contentType, form.body);
  expect(over.status).toBe(402);
  expect(await counterAndSum(small.userId)).toMatchObject({ counter: MiB - 100, sum: MiB - 100 });
  const fits = await upload(small, 'y'.repeat(100));
  expect(fits.status).toBe(201);
  expect(await counterAndSum(small.userId)).toMatchObject({ counter: MiB, sum: MiB });
}, 60_000);

test('byte counts pass 2 GiB and 4 GiB without wrapping (the storage counter, holds, and the day counters)', async () => {
  // FerretDB 1.24 wraps an int32 field's `$inc` past 2^31 (measured: 2^30 + 2^30 gave -2^31).
  const user = await createUser(api);
  const GiB = 1024 * MiB;
  const { usage, analytics } = api.deps.db;
  expect(await usage.reserve(user.userId, 1.5 * GiB, 10 * GiB)).toBe(1.5 * GiB);
  expect(await usage.reserve(user.userId, GiB, 10 * GiB)).toBe(2.5 * GiB);
  expect(await usage.used(user.userId)).toBe(2.5 * GiB);
  await usage.add(user.userId, { files: 3 * GiB, used: 3 * GiB });
  expect(await usage.used(user.userId)).toBe(5.5 * GiB);
  expect(await usage.reserve(user.userId, 4.6 * GiB, 10 * GiB)).toBeNull();
  const at = Date.now();
  for (let i = 0; i < 3; i++) await analytics.record(user.userId, at, { gatewayBytes: 1.5 * GiB, uploadBytes: GiB, storedBytes: GiB });
  const [day] = await analytics.range(user.userId, '2000-01-01', '2999-12-31');
  expect(day).toMatchObject({ gatewayBytes: 4.5 * GiB, uploadBytes: 3 * GiB, storedBytes: 3 * GiB });
});
