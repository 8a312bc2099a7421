// The gateway's cases, run against the API's own gateway (gateway.test.ts) and through the
// edge (gateway-edge.test.ts): each account's gateway at `<slug>.localhost`, serving what the
// account holds through Kubo's gateway with the path gateway specification's behaviour
// (ranges, ETags, directories, trustless formats), and nothing else.
import { CarBlockIterator } from '@ipld/car';
import type { ApiServer } from '../../api/server.js';
import { collect, kubo } from './content.js';
import { startEdgedApi, type EdgedApi } from './edge.js';
import { hostRequest, type HostReply } from './host-request.js';
import { startSecondNode } from './second-node.js';
import { call, createUser, startTestApi, type TestUser } from './stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './worker.js';

export function gatewayCases(through: 'api' | 'edge'): void {
  let api: ApiServer;
  let edged: EdgedApi | undefined;
  let worker: WorkerProcess;
  let user: TestUser;
  let other: TestUser;
  let slug: string;
  const queue = testTaskQueue();

  beforeAll(async () => {
    const env = { TEMPORAL_TASK_QUEUE: queue };
    if (through === 'edge') edged = await startEdgedApi(env);
    [api, worker] = await Promise.all([edged ? edged.api : startTestApi(env), startWorkerProcess(env)]);
    [user, other] = await Promise.all([createUser(api), createUser(api)]);
    slug = (await api.deps.db.users.get(user.userId))!.gatewaySlug!;
  });
  afterAll(async () => {
    await Promise.all([edged ? edged.close() : api?.close(), worker?.kill()]);
  });

  /** A request to the gateway (the API's, or the edge's) with the Host of an account's gateway (`<slug>.localhost`). */
  function gw(path: string, options: { slug?: string | null; method?: string; headers?: Record<string, string> } = {}): Promise<HostReply> {
    const port = new URL(edged ? `http://127.0.0.1:${edged.ports.gateway}` : api.gatewayUrl).port;
    const host = options.slug === null ? `localhost:${port}` : `${options.slug ?? slug}.localhost:${port}`;
    return hostRequest(port, host, path, options);
  }

  async function upload(owner: TestUser, content: string, name = 'hello.txt'): Promise<string> {
    const res = await call(api, 'POST', '/upload/new', { key: owner.apiKey, body: { content, name } });
    expect(res.status).toBe(201);
    return res.body.cid as string;
  }

  /** A directory added to Kubo, then uploaded as a CAR so that the user holds its root. */
  async function uploadDirectory(owner: TestUser, files: Record<string, string>): Promise<string> {
    const entries = Object.entries(files).map(([p, content]) => ({ path: `site/${p}`, content: Buffer.from(content) }));
    let root = '';
    for await (const added of kubo().addAll(entries, { pin: false, cidVersion: 1, rawLeaves: true }))
      if (added.path === 'site') root = added.cid.toString();
    const car = await collect(kubo().dag.export(root as never));
    const form = new FormData();
    form.append('file', new Blob([car]), 'site.car');
    const res = await fetch(`${api.url}/upload/new?car=true`, { method: 'POST', headers: { 'X-Api-Key': owner.apiKey }, body: form });
    expect(res.status).toBe(201);
    return ((await res.json()) as { cid: string }).cid;
  }

  test('serves a held file with the path gateway headers; HEAD has them without a body', async () => {
    const cid = await upload(user, 'hello from the gateway');
    const res = await gw(`/ipfs/${cid}`);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello from the gateway');
    expect(res.headers.etag).toBe(`"${cid}"`);
    expect(res.headers['cache-control']).toBe('public, max-age=29030400, immutable');
    expect(res.headers['x-ipfs-path']).toBe(`/ipfs/${cid}`);
    expect(res.headers['x-ipfs-roots']).toBe(cid);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    // Through the edge the bytes came from Kubo's gateway by way of Caddy, not from the API.
    expect(res.headers.via).toBe(edged ? '1.1 Caddy' : undefined);
    const head = await gw(`/ipfs/${cid}`, { method: 'HEAD' });
    expect([head.status, head.body.length, head.headers.etag]).toEqual([200, 0, `"${cid}"`]);
  });

  test('ranges: a slice, a suffix, and past the end (416); If-None-Match is 304', async () => {
    const cid = await upload(user, '0123456789abcdefghij');
    const slice = await gw(`/ipfs/${cid}`, { headers: { Range: 'bytes=2-5' } });
    expect([slice.status, slice.body.toString(), slice.headers['content-range']]).toEqual([206, '2345', 'bytes 2-5/20']);
    const suffix = await gw(`/ipfs/${cid}`, { headers: { Range: 'bytes=-3' } });
    expect([suffix.status, suffix.body.toString()]).toEqual([206, 'hij']);
    const past = await gw(`/ipfs/${cid}`, { headers: { Range: 'bytes=50-60' } });
    expect(past.status).toBe(416);
    const cached = await gw(`/ipfs/${cid}`, { headers: { 'If-None-Match': `"${cid}"` } });
    expect([cached.status, cached.body.length]).toEqual([304, 0]);
  });

  test("only what the account holds: another account's or nobody's content is 410", async () => {
    const theirs = await upload(other, 'only the other account holds this');
    expect((await gw(`/ipfs/${theirs}`)).status).toBe(410);
    // The other account's own gateway serves it.
    const otherSlug = (await api.deps.db.users.get(other.userId))!.gatewaySlug!;
    expect((await gw(`/ipfs/${theirs}`, { slug: otherSlug })).status).toBe(200);
    const nobodys = (
      await kubo().add(Buffer.from('in kubo, held by nobody'), { pin: false, cidVersion: 1, rawLeaves: true })
    ).cid.toString();
    const gone = await gw(`/ipfs/${nobodys}`, { headers: { Accept: 'application/json' } });
    expect([gone.status, JSON.parse(gone.body.toString()).error.reason]).toEqual([410, 'NOT_HELD']);
    // A browser gets a page, not JSON, and no internals.
    const page = await gw(`/ipfs/${nobodys}`, { headers: { Accept: 'text/html' } });
    expect([page.status, page.headers['content-type']]).toEqual([410, 'text/html; charset=utf-8']);
    expect(page.body.toString()).toContain('NOT_HELD');
  });

  test('unknown slugs and the bare domain are 404; a bad CID is 400; other methods 405', async () => {
    const cid = await upload(user, 'for the error cases');
    expect((await gw(`/ipfs/${cid}`, { slug: 'nobodyhasthisslug' })).status).toBe(404);
    expect((await gw(`/ipfs/${cid}`, { slug: null })).status).toBe(404);
    expect((await gw('/ipfs/not-a-cid')).status).toBe(400);
    expect((await gw('/elsewhere')).status).toBe(404);
    const post = await gw(`/ipfs/${cid}`, { method: 'POST' });
    expect([post.status, post.headers.allow]).toEqual([405, 'GET, HEAD, OPTIONS']);
  });

  test('directories: a listing, index.html, and a path inside', async () => {
    const listing = await uploadDirectory(user, { 'a.txt': 'file a', 'b/c.txt': 'file c' });
    const page = await gw(`/ipfs/${listing}/`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body.toString()).toContain('a.txt');
    expect((await gw(`/ipfs/${listing}/b/c.txt`)).body.toString()).toBe('file c');
    expect((await gw(`/ipfs/${listing}/missing.txt`)).status).toBe(404);
    const site = await uploadDirectory(user, { 'index.html': '<h1>home</h1>', 'style.css': 'h1{}' });
    const home = await gw(`/ipfs/${site}/`);
    expect([home.status, home.body.toString()]).toEqual([200, '<h1>home</h1>']);
    expect(home.headers['content-type']).toMatch(/^text\/html/);
    expect((await gw(`/ipfs/${site}/style.css`)).headers['content-type']).toMatch(/^text\/css/);
  });

  test('trustless formats: raw block, and a CAR that a fresh Kubo imports to the same root', async () => {
    const site = await uploadDirectory(user, { 'index.html': '<p>car me</p>', 'x/y.txt': 'deep' });
    const raw = await gw(`/ipfs/${site}?format=raw`);
    expect([raw.status, raw.headers['content-type']]).toEqual([200, 'application/vnd.ipld.raw']);
    expect(Buffer.compare(raw.body, Buffer.from(await kubo().block.get(site as never)))).toBe(0);
    const car = await gw(`/ipfs/${site}?format=car`);
    expect(car.status).toBe(200);
    expect(car.headers['content-type']).toMatch(/^application\/vnd\.ipld\.car/);
    const roots = await (await CarBlockIterator.fromBytes(car.body)).getRoots();
    expect(roots.map(String)).toEqual([site]);
    const fresh = await startSecondNode();
    try {
      const imported = [];
      for await (const r of fresh.client.dag.import([car.body], { pinRoots: true })) imported.push(r.root.cid.toString());
      expect(imported).toEqual([site]);
      expect((await collect(fresh.client.cat(`/ipfs/${site}/x/y.txt`))).toString()).toBe('deep');
    } finally {
      await fresh.node.stop();
    }
  });

  test("bytes sent count as the account's gateway bandwidth", async () => {
    const reader = await createUser(api);
    const readerSlug = (await api.deps.db.users.get(reader.userId))!.gatewaySlug!;
    const cid = await upload(reader, 'x'.repeat(5000));
    const sent = async () =>
      (await api.deps.db.analytics.range(reader.userId, '2000-01-01', '2999-12-31')).reduce((s, d) => s + (d.gatewayBytes ?? 0), 0);
    for (let i = 0; i < 3; i++) expect((await gw(`/ipfs/${cid}`, { slug: readerSlug })).body.length).toBe(5000);
    expect((await gw(`/ipfs/${cid}`, { slug: readerSlug, headers: { Range: 'bytes=0-99' } })).body.length).toBe(100);
    // Written once a second (and through the edge, after its report arrives).
    await eventually(sent, (n) => n >= 15100, 10_000, 'bytes metered');
    await new Promise((r) => setTimeout(r, 1500));
    expect(await sent()).toBe(15100);
  });

  test("an IPNS path serves the name's current target with the record's TTL, and follows a publish", async () => {
    const owner = await createUser(api, 'karma');
    const ownerSlug = (await api.deps.db.users.get(owner.userId))!.gatewaySlug!;
    const first = await upload(owner, 'first version');
    const second = await upload(owner, 'second version');
    const { ipnsName } = (await call(api, 'POST', '/ipns/keys', { key: owner.apiKey, body: { name: 'site' } })).body;
    expect((await call(api, 'POST', '/ipns/publish', { key: owner.apiKey, body: { ipnsName, cid: first } })).status).toBe(200);
    const res = await gw(`/ipns/${ipnsName}`, { slug: ownerSlug });
    expect([res.status, res.body.toString()]).toEqual([200, 'first version']);
    expect(res.headers['x-ipfs-path']).toBe(`/ipns/${ipnsName}`);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    await call(api, 'POST', '/ipns/publish', { key: owner.apiKey, body: { ipnsName, cid: second } });
    expect((await gw(`/ipns/${ipnsName}`, { slug: ownerSlug })).body.toString()).toBe('second version');
    // Not served by an account that holds nothing of it; an unknown name is 404.
    expect((await gw(`/ipns/${ipnsName}`)).status).toBe(410);
    expect((await gw(`/ipns/k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8`, { slug: ownerSlug })).status).toBe(404);
  });

  test('a top-level folder by name serves its latest snapshot', async () => {
    const folder = await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: 'my site' } });
    const folderId = folder.body.folderId as string;
    await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: '<h1>snapshotted</h1>', name: 'index.html', folderId } });
    await call(api, 'POST', `/folders/${folderId}/snapshot`, { key: user.apiKey });
    const done = await eventually(
      () => call(api, 'GET', `/folders/${folderId}/snapshot`, { key: user.apiKey }),
      (r) => r.body.status === 'complete',
      60_000,
      'snapshot complete',
    );
    expect(done.body.snapshot.cid).toMatch(/^bafy/);
    const home = await gw('/folders/my%20site/');
    expect([home.status, home.body.toString()]).toEqual([200, '<h1>snapshotted</h1>']);
    expect(home.headers['x-ipfs-path']).toBe('/folders/my%20site/');
    expect(home.headers['cache-control']).toBe('public, max-age=60');
    expect((await gw('/folders/my%20site/index.html')).body.toString()).toBe('<h1>snapshotted</h1>');
    expect((await gw('/folders/no%20such%20folder/')).status).toBe(404);
  });

  test('a small answer read again is the same, and a released hold still stops it', async () => {
    const owner = await createUser(api);
    const ownerSlug = (await api.deps.db.users.get(owner.userId))!.gatewaySlug!;
    const cid = await upload(owner, 'small and read often');
    const first = await gw(`/ipfs/${cid}`, { slug: ownerSlug });
    const again = await gw(`/ipfs/${cid}`, { slug: ownerSlug });
    expect([again.status, again.body.toString()]).toEqual([200, 'small and read often']);
    for (const name of ['etag', 'cache-control', 'content-type', 'content-length', 'x-ipfs-path', 'x-ipfs-roots']) {
      expect([name, again.headers[name]]).toEqual([name, first.headers[name]]);
    }
    expect((await gw(`/ipfs/${cid}`, { slug: ownerSlug, headers: { 'If-None-Match': `"${cid}"` } })).status).toBe(304);
    expect((await gw(`/ipfs/${cid}`, { slug: ownerSlug, headers: { Range: 'bytes=0-4' } })).body.toString()).toBe('small');
    expect((await call(api, 'DELETE', `/pin/${cid}`, { key: owner.apiKey })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100)); // holds are remembered for a second
    expect((await gw(`/ipfs/${cid}`, { slug: ownerSlug })).status).toBe(410);
  });
}
