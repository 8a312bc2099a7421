import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { call, createUser, errorReason, newestFile, plansFile, startTestApi, type TestUser } from './support/stack.js';
import { bytes, cluster, collect, kubo, kuboCid, MiB, multipart, postStream } from './support/content.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;
const queue = testTaskQueue();

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue, PLANS_FILE: plansFile({ tiny: { storageMB: 2 } }) };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  user = await createUser(api);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

async function clusterPinned(cid: string): Promise<boolean> {
  const info = await cluster().status(cid);
  return Object.values(info.peer_map).some((p) => p.status === 'pinned');
}

describe('JSON uploads', () => {
  test('the bytes "hello world" give the profile\'s known CID, read back from Kubo and pinned in Cluster', async () => {
    const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: 'hello world', description: 'greeting' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      cid: 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e',
      description: 'greeting',
      size: 11,
      mimeType: 'text/plain',
      folderId: null,
      createdAt: expect.any(Number),
      uris: {
        ipfs: 'ipfs://bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e',
        gateway: expect.stringMatching(/\/ipfs\/bafkrei/),
      },
    });
    // The link names the account's own gateway, where the service decides who reads.
    const profile = await call(api, 'GET', '/user/profile', { key: user.apiKey });
    expect(res.body.uris.gateway).toBe(`${profile.body.gatewayUrl}/ipfs/${res.body.cid}`);
    expect(res.body.sizeMB).toBeCloseTo(11 / MiB, 6);
    expect((await collect(kubo().cat(res.body.cid))).toString()).toBe('hello world');

    const { multihash } = parseCid(res.body.cid);
    const file = await newestFile(api, user.userId, multihash);
    expect(file).toMatchObject({ cid: res.body.cid, size: 11, description: 'greeting' });
    expect((await api.deps.db.holds.of(multihash)).holders).toContain(`file:${file!._id}`);
    await eventually(() => clusterPinned(res.body.cid), Boolean, 30_000, 'pinned in cluster');
  });

  test('a JSON value is stored as its JSON text; base64 and data: URLs are decoded', async () => {
    const cases = [
      [{ content: { a: [1, 2], b: 'x' } }, '{"a":[1,2],"b":"x"}', 'application/json'],
      [
        { content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' },
        Buffer.from([0, 1, 2, 255]),
        'application/octet-stream',
      ],
      [{ content: `data:image/png;base64,${Buffer.from('PNGDATA').toString('base64')}` }, 'PNGDATA', 'image/png'],
      [{ content: 'data:text/plain,hello%20there' }, 'hello there', 'text/plain'],
    ] as const;
    for (const [body, expected, mimeType] of cases) {
      const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { ...body, name: 'x' } });
      expect(res.status).toBe(201);
      expect(res.body.mimeType).toBe(mimeType);
      expect(await collect(kubo().cat(res.body.cid))).toEqual(Buffer.from(expected));
      expect(res.body.cid).toBe(
        await kuboCid(async function* () {
          yield Buffer.from(expected);
        }),
      );
    }
  });

  test.each([
    [{ description: 'no content' }, 'content'],
    [{ content: 'x', metadata: { 'bad key': 'v' } }, 'metadata'],
    [{ content: 'x', metadata: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
    [{ content: 'not base64!', encoding: 'base64' }, 'base64'],
    [{ content: 'x', name: 42 }, 'name'],
  ])('bad input %j is 400 naming %s and writes nothing', async (body, word) => {
    const before = await api.deps.db.files.model.countDocuments({ userId: user.userId });
    const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body });
    expect(res.status).toBe(400);
    errorReason(res);
    expect(res.body.error.details).toContain(word);
    expect(await api.deps.db.files.model.countDocuments({ userId: user.userId })).toBe(before);
  });

  test('another content type is 415', async () => {
    const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: 'x', headers: { 'Content-Type': 'text/plain' } });
    expect(res.status).toBe(415);
    expect(errorReason(res)).toBe('UNSUPPORTED_MEDIA_TYPE');
  });
});

describe('multipart uploads', () => {
  test.each([
    ['1 byte', 1, /^bafk/],
    ['1 MiB', MiB, /^bafk/],
    ['1 MiB + 1', MiB + 1, /^bafy/],
  ])('%s: the CID is what Kubo gives with the profile, and the bytes read back', async (_label, size, prefix) => {
    const seed = `mp-${size}`;
    const form = multipart(
      { description: 'd', metadata: JSON.stringify({ team: 'core' }) },
      { name: 'blob.bin', source: bytes(size, seed) },
    );
    const res = await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body);
    expect(res.status).toBe(201);
    expect(res.body.cid).toMatch(prefix);
    expect(res.body.cid).toBe(await kuboCid(() => bytes(size, seed)));
    expect(res.body).toMatchObject({
      name: 'blob.bin',
      size,
      description: 'd',
      metadata: { team: 'core' },
      mimeType: 'application/octet-stream',
    });
    expect((await collect(kubo().cat(res.body.cid))).equals(await collect(bytes(size, seed)))).toBe(true);
  });

  test('the MIME type comes from the part, or else the file name', async () => {
    const a = multipart({}, { name: 'photo.png', type: 'application/octet-stream', source: bytes(10, 'png') });
    expect((await postStream(`${api.url}/upload/new`, user.apiKey, a.contentType, a.body)).body.mimeType).toBe('image/png');
    const b = multipart({}, { name: 'data', type: 'text/csv', source: bytes(10, 'csv') });
    expect((await postStream(`${api.url}/upload/new`, user.apiKey, b.contentType, b.body)).body.mimeType).toBe('text/csv');
  });

  test('a CAR file: its root becomes the file', async () => {
    const k = kubo();
    const dir = await k.add({ path: 'car-dir/a.txt', content: Buffer.from('inside a car') }, { wrapWithDirectory: true, pin: false });
    const car = await collect(k.dag.export(dir.cid));
    const form = multipart(
      { car: 'true', name: 'site' },
      {
        name: 'site.car',
        type: 'application/vnd.ipld.car',
        source: (async function* () {
          yield car;
        })(),
      },
    );
    const res = await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body);
    expect(res.status).toBe(201);
    expect(res.body.cid).toBe(dir.cid.toString());
    expect(res.body.name).toBe('site');
    expect(res.body.size).toBeGreaterThan(12);
    await eventually(() => clusterPinned(res.body.cid), Boolean, 30_000, 'car root pinned in cluster');
  });

  test('a CAR that is not one is 400 INVALID_CAR', async () => {
    const form = multipart({ car: 'true' }, { name: 'bad.car', source: bytes(5000, 'not-a-car') });
    const res = await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body);
    expect(res.status).toBe(400);
    expect(res.body.error.reason).toBe('INVALID_CAR');
  });

  test('no file part is 400; two file parts are 400', async () => {
    const none = multipart({ name: 'x' });
    const r1 = await postStream(`${api.url}/upload/new`, user.apiKey, none.contentType, none.body);
    expect(r1.status).toBe(400);
    expect(r1.body.error.reason).toBe('MISSING_FILE');
    // A part named "file" sent as a text field (no filename) is told so.
    const asField = multipart({ file: 'just text' });
    const r2 = await postStream(`${api.url}/upload/new`, user.apiKey, asField.contentType, asField.body);
    expect(r2.status).toBe(400);
    expect(r2.body.error).toEqual({ reason: 'MISSING_FILE', details: expect.stringMatching(/must be a file.*filename/) });
    // Two file parts.
    const boundary = 'two-files';
    const part = (n: number) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f${n}.txt"\r\nContent-Type: text/plain\r\n\r\nfile ${n}\r\n`;
    const two = await call(api, 'POST', '/upload/new', {
      key: user.apiKey,
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
      body: `${part(1)}${part(2)}--${boundary}--\r\n`,
    });
    expect(two.status).toBe(400);
    expect(two.body.error.reason).toMatch(/^INVALID_MULTIPART$/);
  });

  test('query parameters are checked: car is true or false, nothing else is accepted', async () => {
    for (const query of ['car=AAA', 'foo=1']) {
      const res = await call(api, 'POST', `/upload/new?${query}`, { key: user.apiKey, body: { content: 'q' } });
      expect({ query, status: res.status, reason: res.body.error?.reason }).toEqual({ query, status: 400, reason: 'INVALID_INPUT' });
    }
    const ok = await call(api, 'POST', '/upload/new?car=false', { key: user.apiKey, body: { content: 'query ok' } });
    expect(ok.status).toBe(201);
  });

  test('the same content under another name is another file, counted once; the same upload again is the same file', async () => {
    const u = await createUser(api);
    const send = async (name: string) => {
      const form = multipart({}, { name, source: bytes(1000, 'again') });
      return postStream(`${api.url}/upload/new`, u.apiKey, form.contentType, form.body);
    };
    const first = await send('one.bin');
    const second = await send('two.bin');
    expect(second.body.cid).toBe(first.body.cid);
    expect([first.body.name, second.body.name]).toEqual(['one.bin', 'two.bin']);
    expect(second.body.id).not.toBe(first.body.id);
    const again = await send('one.bin');
    expect([again.body.id, again.body.createdAt]).toEqual([first.body.id, first.body.createdAt]);
    expect(await api.deps.db.files.model.countDocuments({ userId: u.userId })).toBe(2);
    expect(await api.deps.db.usage.used(u.userId)).toBe(1000);
  });

  test('the storage quota is enforced with 402 STORAGE_LIMIT, and nothing is recorded', async () => {
    const small = await createUser(api, 'tiny'); // 2 MB
    const ok = multipart({}, { name: 'a', source: bytes(MiB, 'q1') });
    expect((await postStream(`${api.url}/upload/new`, small.apiKey, ok.contentType, ok.body)).status).toBe(201);
    const over = multipart({}, { name: 'b', source: bytes(MiB + 100, 'q2') });
    const res = await postStream(`${api.url}/upload/new`, small.apiKey, over.contentType, over.body);
    expect(res.status).toBe(402);
    expect(res.body.error.reason).toBe('STORAGE_LIMIT');
    expect(await api.deps.db.files.model.countDocuments({ userId: small.userId })).toBe(1);
    expect(await api.deps.db.usage.used(small.userId)).toBe(MiB);
    // JSON uploads too.
    const json = await call(api, 'POST', '/upload/new', { key: small.apiKey, body: { content: 'y'.repeat(MiB + 10) } });
    expect(json.status).toBe(402);
  });
});

describe("fields after the file (the file goes to Kubo in the form's own framing)", () => {
  const B = 'after-the-file';
  const field = (name: string, value: string | Buffer) =>
    Buffer.concat([
      Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n`),
      Buffer.from(value),
      Buffer.from('\r\n'),
    ]);
  const form = (file: Buffer, after: Buffer[], close = `--${B}--\r\n`) =>
    Buffer.concat([
      Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n`),
      file,
      Buffer.from('\r\n'),
      ...after,
      Buffer.from(close),
    ]);
  const send = (key: string, body: Buffer, chunked = false) =>
    chunked
      ? postStream(
          `${api.url}/upload/new`,
          key,
          `multipart/form-data; boundary=${B}`,
          (async function* () {
            yield body;
          })(),
        )
      : call(api, 'POST', '/upload/new', { key, headers: { 'Content-Type': `multipart/form-data; boundary="${B}"` }, body });

  test('apply to the record; the file is exactly its bytes, sent with a length or chunked', async () => {
    const u = await createUser(api);
    const file = await collect(bytes(3 * MiB + 5, 'after'));
    const body = form(file, [field('name', 'named after.bin'), field('description', 'd'), field('metadata', '{"k":"v"}')]);
    const cid = await kuboCid(() => bytes(3 * MiB + 5, 'after'));
    for (const chunked of [false, true]) {
      const res = await send(u.apiKey, body, chunked);
      expect({ chunked, status: res.status }).toEqual({ chunked, status: 201 });
      expect(res.body).toMatchObject({ cid, size: file.length, name: 'named after.bin', description: 'd', metadata: { k: 'v' } });
    }
    // An empty file, the delimiter right after its part head.
    const empty = await send(u.apiKey, form(Buffer.alloc(0), [field('name', 'empty')]));
    expect(empty.body).toMatchObject({ cid: await kuboCid(() => bytes(0)), size: 0, name: 'empty' });
    expect((await call(api, 'DELETE', `/files/${empty.body.id}`, { key: u.apiKey })).body).toMatchObject({ success: true });
    // The same file twice under one name: one record, its bytes counted once, exactly.
    expect(await api.deps.db.files.model.countDocuments({ userId: u.userId })).toBe(1);
    expect(await api.deps.db.usage.used(u.userId)).toBe(file.length);
    expect((await collect(kubo().cat(cid))).equals(file)).toBe(true);
  });

  test('a body cut short, a field too long, or more after the file than is read is 400, and nothing is recorded', async () => {
    const u = await createUser(api);
    const file = await collect(bytes(MiB, 'after-bad'));
    const cases: [string, Buffer, RegExp, string?][] = [
      ['no closing delimiter', form(file, [field('name', 'x')], ''), /Unexpected end of form/],
      ['a field over 64 KiB', form(file, [field('description', 'd'.repeat(70_000))]), /longer than/, 'INVALID_INPUT'],
      [
        'a second file',
        form(file, [Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="2"\r\n\r\nx\r\n`)]),
        /text field/,
      ],
      // A header Kubo skips the part for (a blank before its colon) and the API's reader takes.
      [
        'a part Kubo skips',
        form(file, [Buffer.from(`--${B}\r\nContent-Disposition : form-data; name="name"\r\n\r\nx\r\n`)]),
        /malformed or too long/,
      ],
      // 3 MiB of field: more than the end the API reads, so Kubo finds more parts than it does.
      ['3 MiB after the file', form(file, [field('description', 'd'.repeat(3 * MiB)), field('name', 'x')]), /too long/],
    ];
    for (const [label, body, details, reason = 'INVALID_MULTIPART'] of cases) {
      for (const chunked of [false, true]) {
        const res = await send(u.apiKey, body, chunked);
        expect({ label, chunked, status: res.status, reason: res.body.error?.reason }).toEqual({
          label,
          chunked,
          status: 400,
          reason,
        });
        expect(res.body.error.details).toMatch(details);
      }
    }
    expect(await api.deps.db.files.model.countDocuments({ userId: u.userId })).toBe(0);
    expect(await api.deps.db.usage.used(u.userId)).toBe(0);
  });

  test("the quota counts the file's bytes only: a file that fills the account fits with fields after it", async () => {
    const small = await createUser(api, 'tiny'); // 2 MiB
    const full = await send(small.apiKey, form(await collect(bytes(2 * MiB, 'fill')), [field('name', 'fills it')]));
    expect(full.status).toBe(201);
    expect(full.body.size).toBe(2 * MiB);
    const one = await send(small.apiKey, form(Buffer.from('1'), [field('name', 'one more')]));
    expect(one.status).toBe(402);
    expect(await api.deps.db.usage.used(small.userId)).toBe(2 * MiB);
  });
});

test('1 GiB + 1 byte streams through with the profile CID', async () => {
  const size = 1024 * MiB + 1;
  const big = await createUser(api, 'bodhi'); // more than the free plan's 1 GiB
  const form = multipart({}, { name: 'big.bin', source: bytes(size, 'big') });
  const t = Date.now();
  const res = await postStream(`${api.url}/upload/new`, big.apiKey, form.contentType, form.body);
  process.stderr.write(`1 GiB + 1 upload through the API: ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
  expect(res.status).toBe(201);
  expect(res.body.size).toBe(size);
  expect(res.body.cid).toBe(await kuboCid(() => bytes(size, 'big')));
  const stat = await kubo().files.stat(`/ipfs/${res.body.cid}`);
  expect(Number(stat.size)).toBe(size);
}, 600_000);
