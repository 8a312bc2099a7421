// The IPFS Pinning Service API under /psa on the real stack: the spec's shapes exactly (no
// property it does not define), 202s, Failure bodies and 401s, every filter, pagination by
// `before` over pins created in the same millisecond, replace, delete, tenancy, and the same
// holds as /pin. Kubo's own client is in psa-kubo.test.ts.
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { kubo } from './support/content.js';
import { call, createUser, errorReason, startTestApi, type Reply, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
let api: ApiServer;
let worker: WorkerProcess;
let peerId: string;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  peerId = (await kubo().id()).id.toString();
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const psa = <T = any>(method: string, path: string, user: TestUser | null, body?: unknown, token?: string): Promise<Reply<T>> =>
  call<T>(api, method, `/psa${path}`, {
    body,
    headers: token !== undefined ? { Authorization: `Bearer ${token}` } : user ? { Authorization: `Bearer ${user.apiKey}` } : {},
  });

/** New content in the stack's Kubo that nothing holds yet: pinning it needs no network. */
async function content(label: string): Promise<string> {
  return (await kubo().add(`${label} ${Math.random()}`, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString();
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A PinStatus with exactly the spec's properties, at every level. */
function expectPinStatus(status: any, cid: string): void {
  expect(Object.keys(status).sort()).toEqual(['created', 'delegates', 'info', 'pin', 'requestid', 'status']);
  expect(status.created).toMatch(ISO_MS);
  expect(['queued', 'pinning', 'pinned']).toContain(status.status);
  expect(Object.keys(status.pin).every((k) => ['cid', 'name', 'origins', 'meta'].includes(k))).toBe(true);
  expect(status.pin.cid).toBe(cid);
  expect(status.delegates.length).toBeGreaterThanOrEqual(1);
  expect(status.delegates.length).toBeLessThanOrEqual(20);
  for (const d of status.delegates) expect(d).toMatch(new RegExp(`/p2p/${peerId}$`));
  expect(Object.values(status.info).every((v) => typeof v === 'string')).toBe(true);
}

test('add, get and list answer the spec shapes; 401s and 404s are Failure bodies; another account sees 404', async () => {
  const user = await createUser(api, 'karma');
  const cid = await content('shape');
  const added = await psa('POST', '/pins', user, { cid, name: 'shape.txt', meta: { app: 'tests' } });
  expect(added.status).toBe(202);
  expect(added.headers.get('content-type')).toMatch(/^application\/json/);
  expectPinStatus(added.body, cid);
  expect(added.body.pin).toEqual({ cid, name: 'shape.txt', origins: [], meta: { app: 'tests' } });

  const pinned = await eventually(
    () => psa('GET', `/pins/${added.body.requestid}`, user),
    (r) => r.body.status === 'pinned',
    30_000,
    'pinned',
  );
  expectPinStatus(pinned.body, cid);
  expect(pinned.body.created).toBe(added.body.created);
  expect((await api.deps.cluster.allocation(cid))?.metadata).toMatchObject({ service: 'stupa' });

  const listed = await psa('GET', '/pins', user);
  expect(Object.keys(listed.body).sort()).toEqual(['count', 'results']);
  expect(listed.body.count).toBe(1);
  expectPinStatus(listed.body.results[0], cid);

  for (const reply of [await psa('GET', '/pins', null), await psa('GET', '/pins', null, undefined, 'purposefullyInvalid')]) {
    expect(reply.status).toBe(401);
    expect(Object.keys(reply.body)).toEqual(['error']);
    errorReason(reply);
  }
  const other = await createUser(api, 'karma');
  for (const [method, body] of [['GET'], ['DELETE'], ['POST', { cid }]] as const) {
    const reply = await psa(method, `/pins/${added.body.requestid}`, other, body);
    expect(reply.status).toBe(404);
    errorReason(reply);
  }
  expect((await psa('GET', '/pins', other)).body).toEqual({ count: 0, results: [] });
  expect(errorReason(await psa('POST', '/pins', user, { cid: 'not-a-cid' }))).toBe('INVALID_CID');
  expect((await psa('POST', '/pins', user, { cid, origins: ['/ip4/1.2.3.4/tcp/4001'] })).status).toBe(400);
  expect((await psa('GET', '/pins/nope', user)).status).toBe(404);
}, 60_000);

test('25 pins made at once page by `before` without a repeat or a gap; count follows every filter', async () => {
  const user = await createUser(api, 'karma');
  const cids = await Promise.all(Array.from({ length: 25 }, (_, i) => content(`page ${i}`)));
  const made = await Promise.all(cids.map((cid, i) => psa('POST', '/pins', user, { cid, name: `page-${i}` })));
  expect(made.every((r) => r.status === 202)).toBe(true);
  const created = made.map((r) => r.body.created as string);
  // Unique to the millisecond, though requested together.
  expect(new Set(created).size).toBe(25);

  const seen: string[] = [];
  const counts: number[] = [];
  let before: string | undefined;
  for (;;) {
    const page = await psa('GET', `/pins?limit=10${before ? `&before=${encodeURIComponent(before)}` : ''}`, user);
    counts.push(page.body.count);
    if (page.body.results.length === 0) break;
    const times = page.body.results.map((r: any) => r.created as string);
    expect([...times].sort().reverse()).toEqual(times); // newest first
    seen.push(...page.body.results.map((r: any) => r.requestid as string));
    before = times[times.length - 1];
  }
  expect(seen.sort()).toEqual(made.map((r) => r.body.requestid as string).sort());
  expect(counts).toEqual([25, 15, 5, 0]);

  // after is exclusive too; before+after together; a fraction below the millisecond keeps it.
  const sorted = [...created].sort();
  const middle = sorted[12]!;
  expect((await psa('GET', `/pins?after=${encodeURIComponent(middle)}&limit=1000`, user)).body.count).toBe(12);
  expect((await psa('GET', `/pins?before=${encodeURIComponent(middle)}&limit=1000`, user)).body.count).toBe(12);
  const nanos = middle.replace('Z', '999999Z');
  expect((await psa('GET', `/pins?before=${encodeURIComponent(nanos)}&limit=1000`, user)).body.count).toBe(13);
  expect(
    (await psa('GET', `/pins?after=${encodeURIComponent(sorted[0]!)}&before=${encodeURIComponent(sorted[24]!)}`, user)).body.count,
  ).toBe(23);
  const offset = new Date(Date.parse(middle)).toISOString().replace('Z', '+00:00');
  expect((await psa('GET', `/pins?before=${offset}&limit=1000`, user)).body.count).toBe(12); // '+' unencoded

  for (const bad of ['limit=0', 'limit=1001', 'limit=ten', 'before=yesterday', 'status=done', 'match=fuzzy&name=x', 'meta=notjson']) {
    const reply = await psa('GET', `/pins?${bad}`, user);
    expect(reply.status).toBe(400);
    errorReason(reply);
  }
}, 120_000);

test('filters: cid (CIDv0 too, CSV), name with each match, status CSV, meta as JSON and as meta[key]', async () => {
  const user = await createUser(api, 'karma');
  const [a, b, c] = await Promise.all([content('filter a'), content('filter b'), content('filter c')]);
  const pa = (await psa('POST', '/pins', user, { cid: a, name: 'Holiday-Photos.zip', meta: { app: 'one', kind: 'x' } })).body;
  const pb = (await psa('POST', '/pins', user, { cid: b, name: 'holiday-notes.txt', meta: { app: 'two' } })).body;
  await psa('POST', '/pins', user, { cid: c });
  const names = async (query: string) => {
    const r = await psa('GET', `/pins?${query}`, user);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(r.body.results.length);
    return r.body.results.map((x: any) => x.requestid).sort();
  };
  expect(await names(`cid=${parseCid(a).cid.toV1().toString()},${b}`)).toEqual([pa.requestid, pb.requestid].sort());
  // A raw-leaf CID has no CIDv0; content added as dag-pb does.
  const v0Content = (await kubo().add(`v0 ${Math.random()}`, { cidVersion: 0, pin: false })).cid.toString();
  const pv0 = (await psa('POST', '/pins', user, { cid: v0Content })).body;
  expect(pv0.pin.cid).toBe(parseCid(v0Content).v1);
  expect(await names(`cid=${v0Content}`)).toEqual([pv0.requestid]);

  expect(await names('name=Holiday-Photos.zip')).toEqual([pa.requestid]);
  expect(await names('name=holiday-photos.zip')).toEqual([]);
  expect(await names('name=holiday-photos.zip&match=iexact')).toEqual([pa.requestid]);
  expect(await names('name=holiday&match=partial')).toEqual([pb.requestid]);
  expect(await names('name=HOLIDAY&match=ipartial')).toEqual([pa.requestid, pb.requestid].sort());
  expect(await names(`name=${encodeURIComponent('.zip')}&match=partial`)).toEqual([pa.requestid]);
  expect(await names(`name=${encodeURIComponent('(')}&match=partial`)).toEqual([]);

  expect(await names(`meta=${encodeURIComponent(JSON.stringify({ app: 'one' }))}`)).toEqual([pa.requestid]);
  expect(await names('meta[app]=two')).toEqual([pb.requestid]);
  expect(await names(`meta=${encodeURIComponent(JSON.stringify({ app: 'one', kind: 'y' }))}`)).toEqual([]);
  expect(await names('meta[no-such-key]=1')).toEqual([]);

  await eventually(
    () => names('status=pinned'),
    (ids) => ids.length === 4,
    30_000,
    'all pinned',
  );
  expect(await names('status=queued,pinning')).toEqual([]);
  const two = await psa('GET', '/pins?status=failed%2Cpinned&limit=2', user);
  expect(two.body.results).toHaveLength(2);
  expect(two.body.count).toBe(4);
}, 90_000);

test('replace gives a new request ID (the old one is 404) for other content and for the same; delete is 202 and gone at once', async () => {
  const user = await createUser(api, 'karma');
  const [first, second] = await Promise.all([content('replace 1'), content('replace 2')]);
  const original = (await psa('POST', '/pins', user, { cid: first, name: 'v1' })).body;
  await eventually(
    () => psa('GET', `/pins/${original.requestid}`, user),
    (r) => r.body.status === 'pinned',
    30_000,
    'pinned',
  );

  const replaced = await psa('POST', `/pins/${original.requestid}`, user, { cid: second, name: 'v2' });
  expect(replaced.status).toBe(202);
  expectPinStatus(replaced.body, second);
  expect(replaced.body.requestid).not.toBe(original.requestid);
  expect((await psa('GET', `/pins/${original.requestid}`, user)).status).toBe(404);
  expect((await psa('GET', `/pins/${replaced.body.requestid}`, user)).body.pin.name).toBe('v2');
  // The first content lost its only holder: it leaves Cluster.
  await syncRoundsDone(api.deps.temporal.client, first);
  expect(await api.deps.cluster.allocation(first)).toBeNull();

  // The same content again: a new request ID, renamed, still held and pinned.
  const again = await psa('POST', `/pins/${replaced.body.requestid}`, user, { cid: second, name: 'v3', meta: { n: '3' } });
  expect(again.status).toBe(202);
  expect(again.body.requestid).not.toBe(replaced.body.requestid);
  expect((await psa('GET', `/pins/${replaced.body.requestid}`, user)).status).toBe(404);
  await eventually(
    () => psa('GET', `/pins/${again.body.requestid}`, user),
    (r) => r.body.status === 'pinned',
    30_000,
    'pinned again',
  );
  await syncRoundsDone(api.deps.temporal.client, second);
  expect((await api.deps.cluster.allocation(second))?.metadata).toMatchObject({ service: 'stupa' });
  expect((await psa('GET', '/pins', user)).body.count).toBe(1);

  const removed = await psa('DELETE', `/pins/${again.body.requestid}`, user);
  expect(removed.status).toBe(202);
  expect(removed.text).toBe('');
  expect((await psa('GET', '/pins', user)).body).toEqual({ count: 0, results: [] });
  expect((await psa('GET', `/pins/${again.body.requestid}`, user)).status).toBe(404);
  await syncRoundsDone(api.deps.temporal.client, second);
  expect(await api.deps.cluster.allocation(second)).toBeNull();
}, 90_000);

test('a pin made through /psa is the one /pin shows and deletes, and the reverse; a plan limit is 409', async () => {
  const user = await createUser(api, 'karma');
  const cid = await content('both surfaces');
  const viaPsa = (await psa('POST', '/pins', user, { cid })).body;
  const viaRest = await call(api, 'GET', `/pin/${cid}`, { key: user.apiKey });
  expect(viaRest.body.requestId).toBe(viaPsa.requestid);
  expect((await call(api, 'DELETE', `/pin/${cid}`, { key: user.apiKey })).status).toBe(200);
  expect((await psa('GET', `/pins/${viaPsa.requestid}`, user)).status).toBe(404);

  const made = await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid, name: 'rest' } });
  const listed = (await psa('GET', `/pins?cid=${cid}`, user)).body;
  expect(listed.results.map((r: any) => r.requestid)).toEqual([made.body.requestId]);
  expect((await psa('DELETE', `/pins/${made.body.requestId}`, user)).status).toBe(202);
  expect((await call(api, 'GET', `/pin/${cid}`, { key: user.apiKey })).status).toBe(404);

  // A user over their storage is refused with the spec's 409.
  const full = await createUser(api, 'karma');
  await api.deps.db.usage.ensure(full.userId);
  await api.deps.db.usage.add(full.userId, { files: 10 ** 15 });
  const refused = await psa('POST', '/pins', full, { cid });
  expect(refused.status).toBe(409);
  errorReason(refused);
}, 60_000);
