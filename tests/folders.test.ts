// Folders: CRUD, tenancy, sibling names, moves without cycles, and deletes that release the
// holds inside through the reference-counted unpin (checked in Cluster).
import type { ApiServer } from '../api/server.js';
import { call, createUser, errorReason, startTestApi, type TestUser } from './support/stack.js';
import { cluster } from './support/content.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const as = (user: TestUser) => ({
  post: (path: string, body?: unknown) => call(api, 'POST', path, { key: user.apiKey, body }),
  get: (path: string) => call(api, 'GET', path, { key: user.apiKey }),
  put: (path: string, body: unknown) => call(api, 'PUT', path, { key: user.apiKey, body }),
  del: (path: string) => call(api, 'DELETE', path, { key: user.apiKey }),
});
const mkdir = async (user: TestUser, name: string, parentFolderId?: string) => {
  const res = await as(user).post('/folders', { name, ...(parentFolderId ? { parentFolderId } : {}) });
  expect(res.status).toBe(201);
  return res.body.folderId as string;
};
const upload = async (user: TestUser, content: string, folderId?: string) => {
  const res = await as(user).post('/upload/new', { content, name: `${content}.txt`, ...(folderId ? { folderId } : {}) });
  expect(res.status).toBe(201);
  return res.body.cid as string;
};
const inCluster = async (cid: string) => (await cluster().allocations()).some((a) => a.cid === cid);

test('create, read, list one level with cursors, rename; names are unique among siblings and valid path segments', async () => {
  const user = await createUser(api);
  const docs = await as(user).post('/folders', { name: 'docs' });
  expect(docs.status).toBe(201);
  expect(docs.body).toEqual({
    folderId: expect.stringMatching(/^fld_[A-Za-z0-9]{16}$/),
    name: 'docs',
    parentFolderId: null,
    createdAt: expect.any(Number),
    updatedAt: expect.any(Number),
    fileCount: 0,
    latestSnapshot: null,
  });
  const id = docs.body.folderId;
  const sub = await mkdir(user, 'ünïcødé 📁', id);
  await upload(user, 'in-docs', id);
  expect((await as(user).get(`/folders/${id}`)).body).toMatchObject({ folderId: id, fileCount: 1 });

  // The same name beside it is 409; under another parent it is fine.
  const again = await as(user).post('/folders', { name: 'docs' });
  expect(again.status).toBe(409);
  expect(errorReason(again)).toBe('FOLDER_EXISTS');
  await mkdir(user, 'docs', sub);
  for (const name of ['', '.', '..', 'a/b', 'x'.repeat(256), 'é'.repeat(128)]) {
    const bad = await as(user).post('/folders', { name });
    expect({ name, status: bad.status, reason: errorReason(bad) }).toEqual({ name, status: 400, reason: 'INVALID_FOLDER_NAME' });
  }

  // One level, and every folder, newest first, a page at a time.
  const top = await as(user).get('/folders?parentFolderId=root');
  expect(top.body.items.map((f: { name: string }) => f.name)).toEqual(['docs']);
  const children = await as(user).get(`/folders?parentFolderId=${id}`);
  expect(children.body.items.map((f: { folderId: string }) => f.folderId)).toEqual([sub]);
  const first = await as(user).get('/folders?limit=2');
  expect(first.body.items).toHaveLength(2);
  const rest = await as(user).get(`/folders?limit=2&cursor=${first.body.nextCursor}`);
  expect(rest.body).toEqual({ items: [expect.objectContaining({ folderId: id })], nextCursor: null });

  const renamed = await as(user).put(`/folders/${id}`, { name: 'papers' });
  expect(renamed.status).toBe(200);
  expect(renamed.body).toMatchObject({ folderId: id, name: 'papers', fileCount: 1 });
  expect(errorReason(await as(user).put(`/folders/${id}`, {}))).toBe('INVALID_INPUT');
});

test("a folder's fileCount is counted as files come, move and go, and equals the files in MongoDB", async () => {
  const user = await createUser(api);
  const [a, b] = [await mkdir(user, 'a'), await mkdir(user, 'b')];
  const counts = async () => {
    const shown = await Promise.all([a, b].map(async (id) => (await as(user).get(`/folders/${id}`)).body.fileCount as number));
    const stored = await Promise.all([a, b].map((id) => api.deps.db.files.model.countDocuments({ userId: user.userId, folderId: id })));
    expect(shown).toEqual(stored);
    return shown;
  };
  const x = await upload(user, 'count-x', a);
  const y = await upload(user, 'count-y', a);
  expect(await counts()).toEqual([2, 0]);
  // The same content uploaded into another folder is another file there; the first stays.
  const xInB = (await as(user).post('/upload/new', { content: 'count-x', folderId: b })).body.id as string;
  expect(await counts()).toEqual([2, 1]);
  expect((await as(user).del(`/files/${xInB}`)).status).toBe(200);
  expect(await counts()).toEqual([2, 0]);
  expect((await as(user).put(`/files/${x}/move`, { folderId: b })).status).toBe(200);
  expect((await as(user).put(`/files/${y}/move`, { folderId: b })).status).toBe(200);
  expect(await counts()).toEqual([0, 2]);
  expect((await as(user).put(`/files/${x}/move`, { folderId: a })).status).toBe(200);
  expect(await counts()).toEqual([1, 1]);
  // Concurrent moves of one file count once each way.
  await Promise.all([a, b, a, null, a].map((folderId) => as(user).put(`/files/${y}/move`, { folderId })));
  const final = (await as(user).get(`/file/${y}`)).body.folderId as string | null;
  expect(await counts()).toEqual([1 + (final === a ? 1 : 0), final === b ? 1 : 0]);
  expect((await as(user).del(`/pin/${x}`)).status).toBe(200);
  expect(await counts()).toEqual([final === a ? 1 : 0, final === b ? 1 : 0]);
});

test('moves: under another folder, back to the top, never under itself or its own subfolder', async () => {
  const user = await createUser(api);
  const a = await mkdir(user, 'a');
  const b = await mkdir(user, 'b', a);
  const c = await mkdir(user, 'c', b);
  const d = await mkdir(user, 'd');
  expect((await as(user).put(`/folders/${d}`, { parentFolderId: c })).body.parentFolderId).toBe(c);
  for (const target of [a, b, c]) {
    const cycle = await as(user).put(`/folders/${a}`, { parentFolderId: target });
    expect({ target, status: cycle.status, reason: errorReason(cycle) }).toEqual({ target, status: 400, reason: 'FOLDER_CYCLE' });
  }
  expect((await as(user).put(`/folders/${c}`, { parentFolderId: null })).body.parentFolderId).toBeNull();
  expect((await as(user).put(`/folders/${a}`, { parentFolderId: c })).body.parentFolderId).toBe(c);
  // A move onto a sibling's name is 409.
  await mkdir(user, 'b');
  const clash = await as(user).put(`/folders/${b}`, { parentFolderId: null });
  expect(clash.status).toBe(409);
});

test("another user's folder answers as one that does not exist, everywhere", async () => {
  const hers = await mkdir(alice, 'private');
  const cid = await upload(bob, 'bobs-file');
  const bobAs = as(bob);
  const answers = [
    await bobAs.get(`/folders/${hers}`),
    await bobAs.put(`/folders/${hers}`, { name: 'mine' }),
    await bobAs.del(`/folders/${hers}?recursive=true`),
    await bobAs.post('/folders', { name: 'x', parentFolderId: hers }),
    await bobAs.get(`/folders?parentFolderId=${hers}`),
    await bobAs.post(`/folders/${hers}/snapshot`),
    await bobAs.get(`/folders/${hers}/snapshot`),
    await bobAs.get(`/folders/${hers}/snapshots`),
    await bobAs.put(`/files/${cid}/move`, { folderId: hers }),
  ];
  for (const res of answers) expect(res.status).toBe(404);
  const missing = await as(bob).get('/folders/fld_doesnotexist0000');
  expect(missing.body).toEqual(answers[0]!.body);
  // As the folder of an upload, too: the same answer as a folder that does not exist.
  const intoHers = await bobAs.post('/upload/new', { content: 'x', folderId: hers });
  const intoNone = await bobAs.post('/upload/new', { content: 'x', folderId: 'fld_doesnotexist0000' });
  expect([intoHers.status, errorReason(intoHers)]).toEqual([intoNone.status, errorReason(intoNone)]);
  expect((await as(alice).get(`/folders/${hers}`)).status).toBe(200);
});

test('a non-empty folder is 409 unless recursive, which releases every hold inside and nothing else', async () => {
  const user = await createUser(api);
  const top = await mkdir(user, 'top');
  const inner = await mkdir(user, 'inner', top);
  const onlyHere = await upload(user, `only-here-${Date.now()}`, inner);
  const shared = await upload(user, `shared-${Date.now()}`, top);
  // Another user also holds `shared`, by a pin of the same CID.
  const other = await createUser(api);
  expect((await as(other).post('/pin', { cid: shared })).status).toBe(202);
  for (const cid of [onlyHere, shared]) await eventually(() => inCluster(cid), Boolean, 30_000, `${cid} pinned`);

  const refused = await as(user).del(`/folders/${top}`);
  expect(refused.status).toBe(409);
  expect(errorReason(refused)).toBe('FOLDER_NOT_EMPTY');

  const rules = { CORSRules: [{ AllowedOrigins: ['https://example.com'], AllowedMethods: ['GET'] }] };
  expect((await as(user).put(`/folders/${inner}/cors`, rules)).status).toBe(200);
  const gone = await as(user).del(`/folders/${top}?recursive=true`);
  expect(gone.body).toEqual({ success: true, folderId: top });
  for (const id of [top, inner]) expect((await as(user).get(`/folders/${id}`)).status).toBe(404);
  expect(await api.deps.db.cors.get(inner)).toBeNull();
  expect((await as(user).get('/upload/list')).body.items).toEqual([]);
  for (const cid of [onlyHere, shared]) await syncRoundsDone(api.deps.temporal.client, cid);
  expect(await inCluster(onlyHere)).toBe(false);
  expect(await inCluster(shared)).toBe(true);

  // An empty folder goes without ?recursive.
  const empty = await mkdir(user, 'empty');
  expect((await as(user).del(`/folders/${empty}`)).status).toBe(200);
});
