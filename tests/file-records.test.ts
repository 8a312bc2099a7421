// Files are records, not CIDs: the same bytes may be several files of one account (empty files,
// one logo in two folders, a LICENSE per package); every file stays where it was put, counts in
// its folder, and a snapshot of a tree uploaded file by file equals `ipfs add -r` of that tree,
// flat or HAMT-sharded. The CID routes act on the one file of a CID or answer 409 naming the
// ids; deleting one copy keeps the content pinned while another holds it. (Files from before
// file ids: tests/migrations.test.ts.)
import fs from 'node:fs';
import path from 'node:path';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { base58btc } from 'multiformats/bases/base58';
import pLimit from 'p-limit';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import type { FileRecord } from '../infra/db/files.js';
import { addTree, cluster, kubo } from './support/content.js';
import { call, createUser, errorReason, plansFile, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, syncRoundsDone, testTaskQueue, type WorkerProcess } from './support/worker.js';

// No request rate in the way of 1,500 uploads.
const env = { TEMPORAL_TASK_QUEUE: testTaskQueue(), PLANS_FILE: plansFile({ dharma: { requestsPerMinute: 100_000 } }) };
let api: ApiServer;
let worker: WorkerProcess;

beforeAll(async () => {
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

const as = (user: TestUser) => ({
  get: (p: string) => call(api, 'GET', p, { key: user.apiKey }),
  post: (p: string, body?: unknown) => call(api, 'POST', p, { key: user.apiKey, body }),
  put: (p: string, body?: unknown) => call(api, 'PUT', p, { key: user.apiKey, body }),
  del: (p: string) => call(api, 'DELETE', p, { key: user.apiKey }),
});

const mkdir = async (user: TestUser, name: string, parentFolderId?: string) => {
  const res = await as(user).post('/folders', { name, parentFolderId });
  expect(res.status).toBe(201);
  return res.body.folderId as string;
};

/** Uploads bytes as a file (base64 JSON, so binary and empty content both go as they are). */
async function put(user: TestUser, content: Buffer, name: string, folderId: string | null) {
  const res = await as(user).post('/upload/new', { content: content.toString('base64'), encoding: 'base64', name, folderId });
  // The answer's body is shown when it is not 201 (DEBUG_LOG=error logs the API's side).
  expect([name, res.status, res.status === 201 ? '' : res.text]).toEqual([name, 201, '']);
  return res.body as { id: string; cid: string; name: string; folderId: string | null; createdAt: number };
}

/** Every file of the user in the folder (null: the top level), by paging the list. */
async function listed(user: TestUser, folderId: string | null, query = '') {
  const items: { id: string; name: string; cid: string }[] = [];
  let cursor: string | null = null;
  do {
    const res: { body: { items: typeof items; nextCursor: string | null } } = await as(user).get(
      `/upload/list?limit=1000&folderId=${folderId ?? 'root'}${query}${cursor ? `&cursor=${cursor}` : ''}`,
    );
    items.push(...res.body.items);
    cursor = res.body.nextCursor;
  } while (cursor);
  return items;
}

async function snapshot(user: TestUser, folderId: string): Promise<string> {
  const started = await as(user).post(`/folders/${folderId}/snapshot`);
  expect([200, 202]).toContain(started.status);
  const done = await eventually(
    () => as(user).get(`/folders/${folderId}/snapshot`),
    (r) => r.body.status === 'complete',
    120_000,
    'snapshot complete',
  );
  return done.body.snapshot.cid as string;
}

const inCluster = async (cid: string) => (await cluster().allocations()).some((a) => a.cid === cid);

test('a tree with duplicate contents, uploaded file by file: every file where it was put, counts right, the snapshot equals ipfs add -r', async () => {
  const user = await createUser(api);
  const disk = tempDir('stupa-dupes-');
  const logo = Buffer.from(`\x89PNG logo bytes ${Date.now()}`);
  const license = Buffer.from(`MIT License ${Date.now()}\n`);
  const same = Buffer.from(`three names, two folders ${Date.now()}`);
  const empty = Buffer.alloc(0);
  const site = await mkdir(user, 'site');
  const folders: Record<string, string> = { '': site };
  for (const dir of ['en', 'de', 'en/copy', 'pkg-a', 'pkg-b']) {
    const parent = dir.includes('/') ? dir.slice(0, dir.lastIndexOf('/')) : '';
    folders[dir] = await mkdir(user, path.basename(dir), folders[parent]);
    fs.mkdirSync(path.join(disk, dir), { recursive: true });
  }
  const tree: [string, Buffer][] = [
    ['.gitkeep', empty],
    ['en/.gitkeep', empty],
    ['de/.gitkeep', empty],
    ['en/logo.png', logo],
    ['de/logo.png', logo],
    ['en/copy/logo.png', logo],
    ['pkg-a/LICENSE', license],
    ['pkg-b/LICENSE', license],
    ['a.txt', same],
    ['b.txt', same],
    ['de/c.txt', same],
    ['index.html', Buffer.from('<h1>home</h1>')],
  ];
  const ids = new Map<string, string>();
  for (const [file, content] of tree) {
    fs.writeFileSync(path.join(disk, file), content);
    const dir = file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '';
    ids.set(file, (await put(user, content, path.basename(file), folders[dir]!)).id);
  }
  expect(new Set(ids.values()).size).toBe(tree.length);

  // Every file is listed in its folder under its name, and each folder counts its own.
  for (const [dir, folderId] of Object.entries(folders)) {
    const want = tree.filter(([f]) => (f.includes('/') ? f.slice(0, f.lastIndexOf('/')) : '') === dir).map(([f]) => path.basename(f));
    const items = await listed(user, folderId);
    expect({ dir, names: items.map((i) => i.name).sort() }).toEqual({ dir, names: want.sort() });
    expect({ dir, fileCount: (await as(user).get(`/folders/${folderId}`)).body.fileCount }).toEqual({ dir, fileCount: want.length });
  }
  // Storage counts each distinct content once.
  const distinct = [empty, logo, license, same, Buffer.from('<h1>home</h1>')].reduce((n, b) => n + b.length, 0);
  expect(await api.deps.db.usage.used(user.userId)).toBe(distinct);

  expect(await snapshot(user, site)).toBe(await addTree(disk));
}, 180_000);

test('a HAMT-sized folder with identical files among 1,500 snapshots to the CID of ipfs add -r', async () => {
  const user = await createUser(api);
  const folder = await mkdir(user, 'many');
  const disk = tempDir('stupa-dupes-hamt-');
  // Names of 156 bytes: 1,500 links make a directory block far past 256 KiB, so a HAMT.
  const pad = 'n'.repeat(150);
  const content = (i: number) => (i % 100 === 7 ? 'identical' : i % 150 === 3 ? '' : `file ${i} ${pad}`);
  const limit = pLimit(8);
  await Promise.all(
    Array.from({ length: 1500 }, (_, i) =>
      limit(async () => {
        const name = `${String(i).padStart(6, '0')}${pad}`;
        fs.writeFileSync(path.join(disk, name), content(i));
        await put(user, Buffer.from(content(i)), name, folder);
      }),
    ),
  );
  expect((await as(user).get(`/folders/${folder}`)).body.fileCount).toBe(1500);
  const expected = await addTree(disk);
  const cid = await snapshot(user, folder);
  expect(cid).toBe(expected);
  const root = dagPb.decode(await kubo().block.get(parseCid(cid).cid));
  expect(UnixFS.unmarshal(root.Data!).type).toBe('hamt-sharded-directory');
  // The identical files are 15 files of one CID, and the empty ones 10.
  const identical = parseCid((await kubo().add('identical', { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
  expect((await as(user).get(`/file/${identical.v1}`)).body.filesWithCid).toBe(15);
  const none = parseCid((await kubo().add(new Uint8Array(0), { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
  expect((await as(user).get(`/file/${none.v1}`)).body.filesWithCid).toBe(10);
}, 300_000);

test('deleting one of two identical files keeps the content pinned and the other listed; deleting the last releases it', async () => {
  const user = await createUser(api);
  const [a, b] = [await mkdir(user, 'a'), await mkdir(user, 'b')];
  const bytes = Buffer.from(`kept while held ${Date.now()}`);
  const first = await put(user, bytes, 'one.txt', a);
  const second = await put(user, bytes, 'two.txt', b);
  expect(second.cid).toBe(first.cid);
  expect(second.id).not.toBe(first.id);
  expect(await inCluster(first.cid)).toBe(true);
  expect(await api.deps.db.usage.used(user.userId)).toBe(bytes.length);

  const gone = await as(user).del(`/files/${first.id}`);
  expect(gone.body).toEqual({ success: true, id: first.id, cid: first.cid });
  await syncRoundsDone(api.deps.temporal.client, first.cid);
  expect(await inCluster(first.cid)).toBe(true);
  expect((await listed(user, a)).length).toBe(0);
  expect((await listed(user, b)).map((f) => f.id)).toEqual([second.id]);
  expect((await as(user).get(`/folders/${a}`)).body.fileCount).toBe(0);
  expect(await api.deps.db.usage.used(user.userId)).toBe(bytes.length);
  expect((await as(user).get(`/files/${first.id}`)).status).toBe(404);
  expect((await as(user).del(`/files/${first.id}`)).status).toBe(404);

  // The last one, by its CID now that it is the only file of it.
  expect((await as(user).del(`/files/${second.cid}`)).body).toEqual({ success: true, id: second.id, cid: second.cid });
  await syncRoundsDone(api.deps.temporal.client, second.cid);
  expect(await inCluster(second.cid)).toBe(false);
  expect(await api.deps.db.usage.used(user.userId)).toBe(0);
  expect((await as(user).get(`/folders/${b}`)).body.fileCount).toBe(0);
}, 120_000);

test('the CID routes: the newest file and a count, the one file or 409 naming the ids, twins refused, other users 404', async () => {
  const [user, other] = [await createUser(api), await createUser(api)];
  const folder = await mkdir(user, 'docs');
  const bytes = Buffer.from(`three files ${Date.now()}`);
  const files = [];
  for (const [name, at] of [
    ['x.txt', null],
    ['y.txt', null],
    ['x.txt', folder],
  ] as const) {
    files.push(await put(user, bytes, name, at));
    await new Promise((r) => setTimeout(r, 5)); // distinct createdAt
  }
  const { cid } = files[0]!;
  const ids = files.map((f) => f.id);

  const newest = await as(user).get(`/file/${cid}`);
  expect(newest.body).toMatchObject({ id: ids[2], cid, name: 'x.txt', folderId: folder, filesWithCid: 3 });
  expect((await as(user).get(`/upload/list?cid=${cid}`)).body.items.map((f: { id: string }) => f.id)).toEqual([...ids].reverse());
  // By the CID in another base too.
  const z = parseCid(cid).cid.toString(base58btc);
  expect((await as(user).get(`/upload/list?cid=${z}`)).body.items).toHaveLength(3);

  // A route given the CID cannot choose: 409 naming every id, and nothing changes.
  for (const [method, route, body] of [
    ['PUT', `/files/${cid}/name`, { name: 'z.txt' }],
    ['PUT', `/files/${cid}/move`, { folderId: null }],
    ['GET', `/files/${cid}`, undefined],
    ['DELETE', `/files/${cid}`, undefined],
    ['DELETE', `/pin/${cid}`, undefined],
    ['DELETE', `/pins/${cid}`, undefined],
  ] as const) {
    const res = await call(api, method, route, { key: user.apiKey, body });
    expect({ route, method, status: res.status, reason: errorReason(res) }).toEqual({
      route,
      method,
      status: 409,
      reason: 'AMBIGUOUS_CID',
    });
    for (const id of ids) expect(res.body.error.details).toContain(id);
  }
  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(3);
  expect((await as(user).get(`/upload/list?cid=${cid}`)).body.items.map((f: { name: string }) => f.name).sort()).toEqual([
    'x.txt',
    'x.txt',
    'y.txt',
  ]);

  // By id, each file on its own.
  const renamed = await as(user).put(`/files/${ids[1]}/name`, { name: 'y2.txt' });
  expect(renamed.body).toMatchObject({ id: ids[1], name: 'y2.txt', folderId: null });
  expect((await api.deps.db.files.model.findById(ids[1]).lean().exec())!.name).toBe('y2.txt');
  expect((await as(user).get(`/files/${ids[0]}`)).body).toMatchObject({ id: ids[0], name: 'x.txt', folderId: null });

  // A rename or move onto a twin (same content, same name, same folder) is 409, naming it.
  const twinName = await as(user).put(`/files/${ids[1]}/name`, { name: 'x.txt' });
  expect([twinName.status, errorReason(twinName)]).toEqual([409, 'FILE_EXISTS']);
  expect(twinName.body.error.details).toContain(ids[0]);
  const twinMove = await as(user).put(`/files/${ids[2]}/move`, { folderId: null });
  expect([twinMove.status, errorReason(twinMove)]).toEqual([409, 'FILE_EXISTS']);
  const stored = (await api.deps.db.files.model.find({ userId: user.userId }).lean<FileRecord[]>().exec()).map((f) => [
    f._id,
    f.name,
    f.folderId,
  ]);
  expect(stored.sort()).toEqual(
    [
      [ids[0], 'x.txt', null],
      [ids[1], 'y2.txt', null],
      [ids[2], 'x.txt', folder],
    ].sort(),
  );

  // Not a file id nor a CID: 400. Another user's file, by id or CID: 404, and untouched.
  const bad = await as(user).put('/files/fil_short/name', { name: 'n' });
  expect([bad.status, errorReason(bad)]).toEqual([400, 'INVALID_FILE_REF']);
  for (const [method, route] of [
    ['GET', `/files/${ids[0]}`],
    ['PUT', `/files/${ids[0]}/name`],
    ['PUT', `/files/${ids[0]}/move`],
    ['DELETE', `/files/${ids[0]}`],
    ['GET', `/file/${cid}`],
    ['DELETE', `/files/${cid}`],
  ] as const) {
    const body = route.endsWith('name') ? { name: 'stolen' } : route.endsWith('move') ? { folderId: null } : undefined;
    const res = await call(api, method, route, { key: other.apiKey, body });
    expect({ route, status: res.status }).toEqual({ route, status: 404 });
  }
  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(3);
}, 120_000);

test('the same upload repeated is the same file; another name or folder is a new one', async () => {
  const user = await createUser(api);
  const folder = await mkdir(user, 'f');
  const bytes = Buffer.from(`idempotent ${Date.now()}`);
  const first = await put(user, bytes, 'a.txt', folder);
  const again = await as(user).post('/upload/new', {
    content: bytes.toString('base64'),
    encoding: 'base64',
    name: 'a.txt',
    folderId: folder,
    description: 'now described',
  });
  expect(again.body).toMatchObject({ id: first.id, createdAt: first.createdAt, description: 'now described' });
  expect((await put(user, bytes, 'b.txt', folder)).id).not.toBe(first.id);
  expect((await put(user, bytes, 'a.txt', null)).id).not.toBe(first.id);
  expect((await as(user).get(`/folders/${folder}`)).body.fileCount).toBe(2);
  expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(3);
}, 60_000);
