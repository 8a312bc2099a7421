import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { call, createUser, errorReason, newestFile, startTestApi, type TestUser } from './support/stack.js';
import { CID } from 'multiformats/cid';

let api: ApiServer;
let alice: TestUser;
let bob: TestUser;
const uploaded: { cid: string; name: string; mimeType: string; createdAt: number }[] = [];

async function upload(user: TestUser, body: Record<string, unknown>) {
  const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body });
  expect(res.status).toBe(201);
  return res.body;
}

beforeAll(async () => {
  // Files need no worker: the records and bytes are the API's; Cluster pinning is tested elsewhere.
  api = await startTestApi();
  [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
  const specs = [
    { content: 'first text', name: 'notes-1.txt' },
    { content: { kind: 'json', n: 1 }, name: 'data.json' },
    { content: `data:image/png;base64,${Buffer.from('not really a png').toString('base64')}`, name: 'Photo.PNG' },
    { content: 'second text', name: 'notes-2.txt' },
    { content: `data:image/jpeg;base64,${Buffer.from('jpeg-ish').toString('base64')}`, name: 'cat.jpg' },
  ];
  for (const spec of specs) {
    uploaded.push(await upload(alice, spec));
    await new Promise((r) => setTimeout(r, 5)); // distinct createdAt
  }
  await upload(bob, { content: 'bob only', name: 'notes-bob.txt' });
});
afterAll(() => api.close());

const names = (items: { name: string }[]) => items.map((f) => f.name);

test('list is newest first, with cursor pagination that visits every file once', async () => {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res: { status: number; body: { items: { name: string }[]; nextCursor: string | null } } = await call(
      api,
      'GET',
      `/upload/list?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      { key: alice.apiKey },
    );
    expect(res.status).toBe(200);
    seen.push(...names(res.body.items));
    cursor = res.body.nextCursor;
    pages++;
  } while (cursor);
  expect(pages).toBe(3);
  expect(seen).toEqual(['cat.jpg', 'notes-2.txt', 'Photo.PNG', 'data.json', 'notes-1.txt']);
});

test('filters: name, MIME type (with wildcards), time range; another user never appears', async () => {
  const list = async (query: string) => (await call(api, 'GET', `/upload/list?${query}`, { key: alice.apiKey })).body.items;
  expect(names(await list('name=notes'))).toEqual(['notes-2.txt', 'notes-1.txt']);
  expect(names(await list('name=photo'))).toEqual(['Photo.PNG']);
  expect(names(await list('mimeType=image/*'))).toEqual(['cat.jpg', 'Photo.PNG']);
  expect(names(await list('mimeType=application/json'))).toEqual(['data.json']);
  const [first, second, third] = uploaded;
  expect(names(await list(`from=${second!.createdAt}&to=${third!.createdAt + 1}`))).toEqual(['Photo.PNG', 'data.json']);
  expect(names(await list(`to=${first!.createdAt + 1}`))).toEqual(['notes-1.txt']);
  expect(names(await list('folderId=root'))).toEqual(['cat.jpg', 'notes-2.txt', 'Photo.PNG', 'data.json', 'notes-1.txt']);
  expect(names(await list('name=bob'))).toEqual([]);
});

test.each([
  ['limit=0', 'limit'],
  ['limit=1001', 'limit'],
  ['mimeType=image', 'mimeType'],
  ['from=10&to=5', 'from'],
  ['cursor=garbage', 'cursor'],
  ['colour=blue', 'colour'],
])('bad list query %s is 400', async (query, word) => {
  const res = await call(api, 'GET', `/upload/list?${query}`, { key: alice.apiKey });
  expect(res.status).toBe(400);
  errorReason(res);
  expect(res.body.error.details).toContain(word);
});

test('GET /file/:cid answers the record, by CIDv1 or its CIDv0 form; another user gets 404', async () => {
  const file = uploaded[1]!;
  const res = await call(api, 'GET', `/file/${file.cid}`, { key: alice.apiKey });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({
    cid: file.cid,
    name: 'data.json',
    mimeType: 'application/json',
    size: 21,
    folderId: null,
    metadata: {},
  });
  expect((await call(api, 'GET', `/file/${file.cid}`, { key: bob.apiKey })).status).toBe(404);

  // A file of more than one block is dag-pb, so it also has a legacy CIDv0 (Qm…) name.
  const big = await upload(alice, { content: 'x'.repeat(1024 * 1024 + 1), name: 'big.txt' });
  expect(big.cid).toMatch(/^bafy/);
  const v0 = CID.parse(big.cid).toV0().toString();
  expect(v0).toMatch(/^Qm/);
  const byV0 = await call(api, 'GET', `/file/${v0}`, { key: alice.apiKey });
  expect(byV0.status).toBe(200);
  expect(byV0.body.cid).toBe(big.cid);

  const bad = await call(api, 'GET', '/file/nope', { key: alice.apiKey });
  expect(bad.status).toBe(400);
  expect(errorReason(bad)).toBe('INVALID_CID');
});

test('rename changes the name in MongoDB; bad names are 400; another user gets 404', async () => {
  const file = uploaded[0]!;
  const res = await call(api, 'PUT', `/files/${file.cid}/name`, { key: alice.apiKey, body: { name: 'renamed.txt' } });
  expect(res.status).toBe(200);
  expect(res.body.name).toBe('renamed.txt');
  expect(res.body.updatedAt).toBeGreaterThanOrEqual(res.body.createdAt);
  expect((await newestFile(api, alice.userId, parseCid(file.cid).multihash))!.name).toBe('renamed.txt');
  expect((await call(api, 'PUT', `/files/${file.cid}/name`, { key: alice.apiKey, body: { name: '' } })).status).toBe(400);
  expect((await call(api, 'PUT', `/files/${file.cid}/name`, { key: alice.apiKey, body: {} })).status).toBe(400);
  expect((await call(api, 'PUT', `/files/${file.cid}/name`, { key: bob.apiKey, body: { name: 'mine' } })).status).toBe(404);
  expect((await newestFile(api, alice.userId, parseCid(file.cid).multihash))!.name).toBe('renamed.txt');
});

test("move into the caller's folder and back; another user's folder is 404 and changes nothing", async () => {
  const now = Date.now();
  await api.deps.db.folders.insert({
    _id: 'fld_alice1',
    userId: alice.userId,
    name: 'docs',
    parentFolderId: null,
    createdAt: now,
    updatedAt: now,
  });
  await api.deps.db.folders.insert({
    _id: 'fld_bob1',
    userId: bob.userId,
    name: 'bobs',
    parentFolderId: null,
    createdAt: now,
    updatedAt: now,
  });
  const file = uploaded[3]!;
  const moved = await call(api, 'PUT', `/files/${file.cid}/move`, { key: alice.apiKey, body: { folderId: 'fld_alice1' } });
  expect(moved.status).toBe(200);
  expect(moved.body.folderId).toBe('fld_alice1');
  expect(names((await call(api, 'GET', '/upload/list?folderId=fld_alice1', { key: alice.apiKey })).body.items)).toEqual(['notes-2.txt']);

  const theirs = await call(api, 'PUT', `/files/${file.cid}/move`, { key: alice.apiKey, body: { folderId: 'fld_bob1' } });
  expect(theirs.status).toBe(404);
  expect(errorReason(theirs)).toBe('NOT_FOUND');
  expect((await newestFile(api, alice.userId, parseCid(file.cid).multihash))!.folderId).toBe('fld_alice1');

  const back = await call(api, 'PUT', `/files/${file.cid}/move`, { key: alice.apiKey, body: { folderId: null } });
  expect(back.body.folderId).toBeNull();
  // An upload straight into a folder, and into another user's folder (400, nothing written).
  const into = await upload(alice, { content: 'in a folder', folderId: 'fld_alice1' });
  expect(into.folderId).toBe('fld_alice1');
  const wrong = await call(api, 'POST', '/upload/new', { key: alice.apiKey, body: { content: 'nope', folderId: 'fld_bob1' } });
  expect(wrong.status).toBe(400);
  expect(errorReason(wrong)).toBe('FOLDER_NOT_FOUND');
});
