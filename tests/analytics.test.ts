// GET /analytics and GET /user/profile on the real stack: events counted per user and UTC day as
// they happen (uploads by type, deletes, pins, IPNS publishes, gateway bytes), storage growth
// derived from today's counter, the period's validation, the profile's fields, and storage
// counted over distinct content: content held both as a file and as a pin counts once, and
// leaves the count only with its last holder.
import crypto from 'node:crypto';
import http from 'node:http';
import type { ApiServer } from '../api/server.js';
import { utcDay } from '../infra/db/analytics.js';
import { collect, bytes, kubo, MiB } from './support/content.js';
import { call, createUser, errorReason, plansFile, startTestApi, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

// The API and the worker share the master key: the worker unseals the IPNS keys the API made.
const env = {
  TEMPORAL_TASK_QUEUE: testTaskQueue(),
  MASTER_KEY: crypto.randomBytes(32).toString('hex'),
  PLANS_FILE: plansFile({ small: { storageMB: 1 }, karma: { ipnsNames: 2, ipnsPublishesPerMonth: 5 } }),
};
let api: ApiServer;
let worker: WorkerProcess;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const DAY = 24 * 60 * 60 * 1000;
const mb = (n: number) => Math.round((n / MiB) * 1e6) / 1e6;

const upload = async (user: TestUser, content: unknown, extra: Record<string, unknown> = {}) => {
  const reply = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, ...extra } });
  expect(reply.status).toBe(201);
  return reply.body as { cid: string; size: number; mimeType: string };
};
/** Reads the content through the user's own gateway (`<slug>.localhost`), as a reader would: its bytes. */
async function readThroughGateway(user: TestUser, cid: string): Promise<number> {
  const slug = (await api.deps.db.users.get(user.userId))!.gatewaySlug!;
  const url = new URL(api.gatewayUrl);
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: url.hostname, port: url.port, path: `/ipfs/${cid}`, headers: { Host: `${slug}.localhost:${url.port}` } },
      (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => (n += c.length));
        res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`gateway answered ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
  });
}
/** The gateway writes its byte counts once a second. */
const gatewayWritten = () => new Promise((r) => setTimeout(r, 1500));

const analytics = (user: TestUser, query = '') => call(api, 'GET', `/analytics${query}`, { key: user.apiKey });
const profile = async (user: TestUser) => (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body;
const pinned = (user: TestUser, cid: string) =>
  eventually(
    () => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey }),
    (r) => r.body.status === 'pinned',
    30_000,
    `${cid} pinned`,
  );

/** Content in Kubo that no one holds yet, and its CID. */
async function outside(size: number, seed: string): Promise<{ cid: string; size: number }> {
  const content = await collect(bytes(size, `${seed}-${crypto.randomUUID()}`));
  // The service's profile: one raw block up to 1 MiB, so an upload of the same bytes has this CID.
  const added = await kubo().add(content, { cidVersion: 1, rawLeaves: true, chunker: 'size-1048576', pin: false });
  return { cid: added.cid.toString(), size };
}

/** The counter document, and what the quota reads. */
async function usage(userId: string) {
  const doc = await api.deps.db.usage.model.findById(userId).lean().exec();
  return { used: doc?.used, files: doc?.files, pinned: doc?.pinned, quota: await api.deps.db.usage.used(userId) };
}

test('totals, daily and storage growth after uploads of several types, a delete, a pin, a publish and gateway bytes', async () => {
  const user = await createUser(api, 'karma');
  const other = await createUser(api, 'karma');
  const today = utcDay(Date.now());

  const text1 = await upload(user, `first ${crypto.randomUUID()} `.repeat(40));
  const text2 = await upload(user, `second ${crypto.randomUUID()} `.repeat(30));
  const json = await upload(user, { list: Array.from({ length: 50 }, (_, i) => `${i}-${crypto.randomUUID()}`) });
  const png = await upload(user, `data:image/png;base64,${crypto.randomBytes(3000).toString('base64')}`);
  expect([text1.mimeType, json.mimeType, png.mimeType]).toEqual(['text/plain', 'application/json', 'image/png']);
  expect((await call(api, 'DELETE', `/pin/${text2.cid}`, { key: user.apiKey })).status).toBe(200);
  const content = await outside(20_000, 'analytics-pin');
  expect((await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid: content.cid } })).status).toBe(202);
  await pinned(user, content.cid);
  const { ipnsName } = (await call(api, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: 'site' } })).body;
  expect((await call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid: json.cid } })).status).toBe(200);
  // Gateway reads: the PNG twice, whole, through the user's gateway.
  const read = (await readThroughGateway(user, png.cid)) + (await readThroughGateway(user, png.cid));
  expect(read).toBe(2 * png.size);
  // Another user's events, which must not show.
  const theirFile = await upload(other, 'data:font/woff2;base64,AAAA');
  await readThroughGateway(other, theirFile.cid);
  await gatewayWritten();

  const reply = await analytics(user);
  expect(reply.status).toBe(200);
  const a = reply.body;
  const stored = text1.size + json.size + png.size + content.size;
  const uploaded = text1.size + text2.size + json.size + png.size;
  expect(a.totals).toEqual({
    uploads: 4,
    storageMB: mb(stored),
    fileTypes: { 'text/plain': 2, 'application/json': 1, 'image/png': 1 },
  });
  expect(a.gatewayBandwidthMB).toBe(mb(2 * png.size));
  expect(a.gatewayBandwidthLimitMB).toBe(api.deps.config.plans.get('karma').gatewayBandwidthMB);
  expect(a.ipnsPublishesThisMonth).toBe(1);
  // The default period: the last 30 UTC days up to today, whole days.
  expect(a.daily).toHaveLength(30);
  expect(a.period).toEqual({ from: Date.parse(`${today}T00:00:00Z`) - 29 * DAY, to: Date.parse(`${today}T00:00:00Z`) + DAY });
  expect(a.daily[0].date).toBe(utcDay(a.period.from));
  expect(a.daily.at(-1)).toEqual({ date: today, uploads: 4, sizeMB: mb(uploaded), gatewayMB: mb(2 * png.size) });
  expect(a.daily.slice(0, -1).every((d: any) => d.uploads === 0 && d.sizeMB === 0)).toBe(true);
  // A new user stored nothing before today.
  expect(a.storageGrowth.map((g: any) => g.date)).toEqual(a.daily.map((d: any) => d.date));
  expect(a.storageGrowth.at(-1)).toEqual({ date: today, cumulativeMB: mb(stored) });
  expect(a.storageGrowth.slice(0, -1).every((g: any) => g.cumulativeMB === 0)).toBe(true);
  // The day document: every event counted, the net storage change included.
  const [day] = await api.deps.db.analytics.range(user.userId, today, today);
  expect(day).toMatchObject({ uploads: 4, deletes: 1, pins: 1, publishes: 1, gatewayBytes: 2 * png.size, storedBytes: stored });

  const theirs = (await analytics(other)).body;
  expect(theirs.totals).toEqual({ uploads: 1, storageMB: mb(3), fileTypes: { 'font/woff2': 1 } });
  expect(theirs.gatewayBandwidthMB).toBe(mb(3));
  expect(theirs.ipnsPublishesThisMonth).toBe(0);
}, 120_000);

test('storage growth over past days and months, from the counter and later net changes', async () => {
  const user = await createUser(api);
  const now = Date.now();
  const file = await upload(user, `growth ${crypto.randomUUID()}`.repeat(100));
  // Earlier days, recorded through the store as the use-cases record them: 2,000 bytes stored
  // 45 days ago, 500 of them removed 40 days ago, 1,500 more removed 10 days ago.
  const type = 'application/vnd.api+json'; // a `.` in a field name is encoded
  await api.deps.db.analytics.record(user.userId, now - 45 * DAY, { uploads: 1, uploadBytes: 2000, mimeType: type, storedBytes: 2000 });
  const [stored] = await api.deps.db.analytics.range(user.userId, utcDay(now - 45 * DAY), utcDay(now - 45 * DAY));
  expect(stored!.types).toEqual({ 'application/vnd%2Eapi+json': 1 });
  await api.deps.db.analytics.record(user.userId, now - 40 * DAY, { deletes: 1, storedBytes: -500 });
  await api.deps.db.analytics.record(user.userId, now - 10 * DAY, { deletes: 1, storedBytes: -1500 });

  const from = utcDay(now - 50 * DAY);
  const to = utcDay(now - 35 * DAY);
  const a = (await analytics(user, `?from=${from}&to=${to}`)).body;
  expect(a.daily).toHaveLength(16);
  expect(a.totals).toEqual({ uploads: 1, storageMB: mb(file.size), fileTypes: { [type]: 1 } });
  const growth = Object.fromEntries(a.storageGrowth.map((g: any) => [g.date, g.cumulativeMB]));
  expect(growth[utcDay(now - 46 * DAY)]).toBe(0);
  expect(growth[utcDay(now - 45 * DAY)]).toBe(mb(2000));
  expect(growth[utcDay(now - 41 * DAY)]).toBe(mb(2000));
  expect(growth[utcDay(now - 40 * DAY)]).toBe(mb(1500));
  expect(growth[to]).toBe(mb(1500));
  expect(a.daily.find((d: any) => d.date === utcDay(now - 45 * DAY))).toEqual({
    date: utcDay(now - 45 * DAY),
    uploads: 1,
    sizeMB: mb(2000),
    gatewayMB: 0,
  });

  // Up to today: the last 30 days see the removal and today's upload.
  const recent = (await analytics(user)).body.storageGrowth;
  expect(recent.find((g: any) => g.date === utcDay(now - 11 * DAY)).cumulativeMB).toBe(mb(1500));
  expect(recent.find((g: any) => g.date === utcDay(now - 10 * DAY)).cumulativeMB).toBe(0);
  expect(recent.at(-1).cumulativeMB).toBe(mb(file.size));
}, 60_000);

test('the period: ms or UTC days, at most 366 days, from not after to; anything else is 400', async () => {
  const user = await createUser(api);
  const today = Date.parse(`${utcDay(Date.now())}T00:00:00Z`);
  const ok = async (query: string, days: number, first: number) => {
    const reply = await analytics(user, query);
    expect([query, reply.status]).toEqual([query, 200]);
    expect([query, reply.body.daily.length, reply.body.period]).toEqual([query, days, { from: first, to: first + days * DAY }]);
  };
  await ok(`?from=${utcDay(today - 365 * DAY)}&to=${utcDay(today)}`, 366, today - 365 * DAY);
  // `to` in ms is exclusive: the start of tomorrow ends the period with today.
  await ok(`?from=${today - 6 * DAY + 123}&to=${today + DAY}`, 7, today - 6 * DAY);
  await ok(`?to=${utcDay(today - 100 * DAY)}`, 30, today - 129 * DAY);
  await ok(`?from=${utcDay(today - 9 * DAY)}`, 10, today - 9 * DAY);
  await ok('?from=2024-02-29&to=2024-02-29', 1, Date.parse('2024-02-29T00:00:00Z'));

  const refused: [string, string][] = [
    [`?from=${utcDay(today - 366 * DAY)}&to=${utcDay(today)}`, 'INVALID_RANGE'],
    [`?from=${utcDay(today)}&to=${utcDay(today - DAY)}`, 'INVALID_RANGE'],
    [`?from=${utcDay(today + DAY)}`, 'INVALID_RANGE'],
    ['?to=0', 'INVALID_RANGE'],
    ['?from=2025-02-30', 'INVALID_INPUT'],
    ['?from=yesterday', 'INVALID_INPUT'],
    ['?from=2025-1-1', 'INVALID_INPUT'],
    ['?from=-5', 'INVALID_INPUT'],
    ['?from=1&from=2', 'INVALID_INPUT'],
    ['?days=7', 'INVALID_INPUT'],
  ];
  for (const [query, reason] of refused) {
    const reply = await analytics(user, query);
    expect([query, reply.status, errorReason(reply)]).toEqual([query, 400, reason]);
  }
  expect((await call(api, 'GET', '/analytics')).status).toBe(401);
}, 60_000);

test('the profile: exactly the contract fields, the plan limits, a slug given once (also lazily to users from before)', async () => {
  const user = await createUser(api, 'karma');
  const file = await upload(user, `profile ${crypto.randomUUID()}`.repeat(20));
  await readThroughGateway(user, file.cid);
  await gatewayWritten();
  // Last month's gateway bytes are not this month's.
  const lastMonth = Date.parse(`${utcDay(Date.now()).slice(0, 7)}-01T00:00:00Z`) - 1;
  await api.deps.db.analytics.record(user.userId, lastMonth, { gatewayBytes: 5 * MiB });
  const p = await profile(user);
  const record = (await api.deps.db.users.model.findById(user.userId).lean().exec())!;
  const { name: _name, label: _label, ...limits } = api.deps.config.plans.get('karma');
  expect(p).toEqual({
    userId: user.userId,
    email: record.email,
    name: 'Test User',
    plan: 'karma',
    limits,
    storageUsedMB: mb(file.size),
    gatewaySlug: record.gatewaySlug,
    gatewayUrl: `http://${record.gatewaySlug}.localhost:${new URL(api.gatewayUrl).port}`,
    gatewayTokenRequired: false,
    gatewayAllowedOrigins: [],
    gatewayIpAllowlist: [],
    gatewayBandwidthUsedMB: mb(file.size),
    createdAt: record.createdAt,
  });
  expect(Object.keys(p).sort()).toEqual(
    [
      'userId',
      'email',
      'name',
      'plan',
      'limits',
      'storageUsedMB',
      'gatewaySlug',
      'gatewayUrl',
      'gatewayTokenRequired',
      'gatewayAllowedOrigins',
      'gatewayIpAllowlist',
      'gatewayBandwidthUsedMB',
      'createdAt',
    ].sort(),
  );
  expect(p.gatewaySlug).toMatch(/^[a-z][a-z0-9]{11}$/);
  expect((await profile(await createUser(api))).gatewaySlug).not.toBe(p.gatewaySlug);
  expect(await api.deps.db.users.slugs.owner(p.gatewaySlug)).toBe(user.userId);

  // A user from before slugs gets one on first asking, once, however many ask at once.
  const old = await createUser(api);
  await api.deps.db.users.model.updateOne({ _id: old.userId }, { $unset: { gatewaySlug: 1, gateway: 1 } }).exec();
  const slugs = await Promise.all(
    Array.from({ length: 8 }, async () => (await call(api, 'GET', '/user/profile', { key: old.apiKey })).body.gatewaySlug),
  );
  expect(new Set(slugs).size).toBe(1);
  expect(slugs[0]).toMatch(/^[a-z][a-z0-9]{11}$/);
  expect((await api.deps.db.users.model.findById(old.userId).lean().exec())!.gatewaySlug).toBe(slugs[0]);
  // Its first claim (orphaned above) and the one assigned; the others were given back.
  expect(await api.deps.db.users.slugs.model.countDocuments({ userId: old.userId })).toBe(2);
  expect((await call(api, 'GET', '/user/profile', { key: old.apiKey })).body).toMatchObject({
    gatewaySlug: slugs[0],
    gatewayTokenRequired: false,
    gatewayAllowedOrigins: [],
    gatewayIpAllowlist: [],
  });
}, 60_000);

test('content held as a file and as a pin counts once, and leaves the count with its last holder, in either order', async () => {
  const user = await createUser(api);
  const storage = async () => ({ profile: (await profile(user)).storageUsedMB, ...(await usage(user.userId)) });
  const c1 = await upload(user, `c1 ${crypto.randomUUID()} `.repeat(300));
  const pin1 = await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid: c1.cid } });
  await pinned(user, c1.cid);
  expect(await storage()).toEqual({ profile: mb(c1.size), used: c1.size, files: c1.size, pinned: c1.size, quota: c1.size });
  // The operator's recount gives the same.
  expect(await api.deps.db.usage.recount(user.userId)).toMatchObject({ used: c1.size, files: c1.size, pinned: c1.size });

  // The pin request goes first (the pinning service API removes only it): the file still holds it.
  const psaDelete = await call(api, 'DELETE', `/psa/pins/${pin1.body.requestId}`, { headers: { Authorization: `Bearer ${user.apiKey}` } });
  expect(psaDelete.status).toBe(202);
  expect(await storage()).toEqual({ profile: mb(c1.size), used: c1.size, files: c1.size, pinned: 0, quota: c1.size });
  expect((await call(api, 'DELETE', `/pin/${c1.cid}`, { key: user.apiKey })).status).toBe(200);
  expect(await storage()).toEqual({ profile: 0, used: 0, files: 0, pinned: 0, quota: 0 });

  // The file goes first (its folder is deleted): the pin still holds it.
  const folder = (await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: 'held twice' } })).body;
  const c2 = await upload(user, `c2 ${crypto.randomUUID()} `.repeat(200), { folderId: folder.folderId });
  expect((await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid: c2.cid } })).status).toBe(202);
  await pinned(user, c2.cid);
  expect(await storage()).toMatchObject({ profile: mb(c2.size), used: c2.size });
  expect((await call(api, 'DELETE', `/folders/${folder.folderId}?recursive=true`, { key: user.apiKey })).status).toBe(200);
  expect(await storage()).toEqual({ profile: mb(c2.size), used: c2.size, files: 0, pinned: c2.size, quota: c2.size });
  expect((await call(api, 'DELETE', `/pin/${c2.cid}`, { key: user.apiKey })).status).toBe(200);
  expect(await storage()).toEqual({ profile: 0, used: 0, files: 0, pinned: 0, quota: 0 });
  expect(await api.deps.db.usage.recount(user.userId)).toMatchObject({ used: 0, files: 0, pinned: 0 });

  // Net changes recorded today add up to what is stored now: nothing.
  const [day] = await api.deps.db.analytics.range(user.userId, utcDay(Date.now()), utcDay(Date.now()));
  expect(day).toMatchObject({ uploads: 2, deletes: 2, unpins: 2, pins: 2, storedBytes: 0 });
}, 120_000);

test('the quota counts distinct content: content already pinned, uploaded too, takes no more room', async () => {
  const user = await createUser(api, 'small'); // 1 MiB
  const held = await outside(500_000, 'quota-pin');
  expect((await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid: held.cid } })).status).toBe(202);
  await pinned(user, held.cid);
  const base64Upload = (content: Buffer) =>
    call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: content.toString('base64'), encoding: 'base64' } });
  // The same bytes uploaded: the same CID, nothing more stored.
  const again = await base64Upload(await collect(kubo().cat(held.cid)));
  expect(again.body.cid).toBe(held.cid);
  expect(await usage(user.userId)).toEqual({ used: held.size, files: held.size, pinned: held.size, quota: held.size });
  // So 500,000 other bytes still fit (1,000,000 <= 1 MiB; counted twice they would not), and
  // then nothing of that size does.
  expect((await base64Upload(crypto.randomBytes(500_000))).status).toBe(201);
  expect(errorReason(await base64Upload(crypto.randomBytes(100_000)))).toBe('STORAGE_LIMIT');
  expect((await profile(user)).storageUsedMB).toBe(mb(1_000_000));
}, 60_000);
