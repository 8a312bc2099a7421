// GET /image/:cid against the real stack: images made with sharp here, uploaded as a user,
// transformed by the API in-process, and decoded again with sharp to check what came back.
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { base36 } from 'multiformats/bases/base36';
import sharp from 'sharp';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/cid.js';
import { ConfigError } from '../infra/errors.js';
import { kubo, multipart, postStream } from './support/content.js';
import { call, createUser, errorReason, startTestApi, testConfig, type TestUser } from './support/stack.js';
import { testTaskQueue } from './support/worker.js';

let api: ApiServer;
let user: TestUser;

beforeAll(async () => {
  api = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue() });
  user = await createUser(api);
});
afterAll(() => api?.close());

async function upload(bytes: Buffer, name = 'image.png'): Promise<string> {
  const form = multipart(
    {},
    {
      name,
      source: (async function* () {
        yield bytes;
      })(),
    },
  );
  const res = await postStream(`${api.url}/upload/new`, user.apiKey, form.contentType, form.body);
  expect(res.status).toBe(201);
  return res.body.cid as string;
}

interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: any;
}

/** A GET that does not follow redirects, with the body as bytes (and as JSON when it is). */
async function get(server: ApiServer, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, { headers, redirect: 'manual' });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) json = JSON.parse(bytes.toString('utf8'));
  return { status: res.status, headers: res.headers, bytes, json };
}

async function decoded(a: Answer) {
  expect(a.status).toBe(200);
  const meta = await sharp(a.bytes, { animated: true }).metadata();
  return { width: meta.width, height: meta.pageHeight ?? meta.height, format: meta.format, pages: meta.pages ?? 1, meta };
}

/** A metric's total over its labels, from GET /metrics. */
async function metric(server: ApiServer, name: string): Promise<number> {
  const text = (await call(server, 'GET', '/metrics')).text;
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+(?:\\.\\d+)?)$`, 'gm'))].reduce((sum, m) => sum + Number(m[1]), 0);
}
const transforms = (server: ApiServer) => metric(server, 'stupa_image_transforms_total');

const noise = (width: number, height: number, channels: 3 | 4 = 3) =>
  sharp({ create: { width, height, channels, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } } });

/** An animated GIF of `frames` frames of 64x32, each a different colour. */
async function animatedGif(frames: number): Promise<Buffer> {
  const images = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      sharp({ create: { width: 64, height: 32, channels: 4, background: { r: i * 60, g: 255 - i * 60, b: 0, alpha: 1 } } })
        .png()
        .toBuffer(),
    ),
  );
  return sharp(images, { join: { animated: true } })
    .gif({ delay: 100, loop: 0 })
    .toBuffer();
}

/** A valid PNG whose header claims 50,000 x 50,000 pixels (7.5 GB of RGB) over a tiny IDAT. */
function pngBomb(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body) >>> 0);
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(50_000, 0);
  header.writeUInt32BE(50_000, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const signature = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([
    signature,
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.alloc(4096))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

describe('transforms', () => {
  let wide: string; // 400 x 200 PNG
  let photo: string; // 300 x 200 JPEG of noise

  beforeAll(async () => {
    wide = await upload(await noise(400, 200).png().toBuffer());
    photo = await upload(await noise(300, 200).jpeg({ quality: 95 }).toBuffer(), 'photo.jpg');
  });

  test.each([
    ['w=100&h=100', 100, 100],
    ['w=100&h=100&fit=cover', 100, 100],
    ['w=100&h=100&fit=contain', 100, 100],
    ['w=100&h=100&fit=fill', 100, 100],
    ['w=100&h=100&fit=inside', 100, 50],
    ['w=100&h=100&fit=outside', 200, 100],
    ['w=100', 100, 50],
    ['h=50', 100, 50],
    // With one dimension every fit keeps the aspect ratio.
    ['w=100&fit=fill', 100, 50],
    ['w=100&fit=contain', 100, 50],
    // Never enlarged.
    ['w=800', 400, 200],
    ['w=800&h=800&fit=cover', 400, 200],
    ['w=800&h=800&fit=inside', 400, 200],
    ['w=800&h=800&fit=fill', 400, 200],
    ['w=300&h=300&fit=outside', 400, 200],
    ['w=300&h=300&fit=cover', 300, 200],
  ])('a 400x200 source with %s is %dx%d', async (query, width, height) => {
    const out = await decoded(await get(api, `/image/${wide}?${query}`));
    expect([out.width, out.height]).toEqual([width, height]);
    expect(out.format).toBe('png'); // the source's format when none is asked for
  });

  test('contain letterboxes to the box, transparent around an image that is not enlarged', async () => {
    const a = await get(api, `/image/${wide}?w=800&h=800&fit=contain`);
    const out = await decoded(a);
    expect([out.width, out.height]).toEqual([800, 800]);
    expect(out.meta.hasAlpha).toBe(true);
    const { info } = await sharp(a.bytes).trim().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([400, 200]);
  });

  test.each([
    ['webp', 'webp', 'image/webp'],
    ['jpeg', 'jpeg', 'image/jpeg'],
    ['png', 'png', 'image/png'],
    ['avif', 'heif', 'image/avif'],
  ])('format=%s gives %s as %s', async (format, decodedFormat, contentType) => {
    const a = await get(api, `/image/${photo}?w=150&format=${format}`);
    expect(a.headers.get('content-type')).toBe(contentType);
    const out = await decoded(a);
    expect(out).toMatchObject({ width: 150, height: 100, format: decodedFormat });
    if (format === 'avif') expect(out.meta.compression).toBe('av1');
    expect(a.headers.get('vary')).toBeNull();
  });

  test('a JPEG stays JPEG without format, and quality changes its size', async () => {
    const sizes: number[] = [];
    for (const quality of [20, 50, 95]) {
      const a = await get(api, `/image/${photo}?w=300&quality=${quality}`);
      expect((await decoded(a)).format).toBe('jpeg');
      sizes.push(a.bytes.length);
    }
    expect(sizes[0]).toBeLessThan(sizes[1]!);
    expect(sizes[1]).toBeLessThan(sizes[2]!);
    // The default is 80: the same bytes as asking for it.
    const byDefault = await get(api, `/image/${photo}?w=300`);
    expect(byDefault.bytes.equals((await get(api, `/image/${photo}?w=300&quality=80`)).bytes)).toBe(true);
  });

  test('format=auto follows Accept (AVIF > WebP > the source format) and says Vary: Accept', async () => {
    const cases: [string, string, string][] = [
      ['image/avif,image/webp,image/apng,*/*;q=0.8', wide, 'image/avif'],
      ['image/webp,*/*', wide, 'image/webp'],
      ['image/avif;q=0,image/webp', wide, 'image/webp'],
      ['*/*', wide, 'image/png'],
      ['*/*', photo, 'image/jpeg'],
      ['', photo, 'image/jpeg'],
    ];
    const tags = new Set<string>();
    for (const [accept, cid, type] of cases) {
      const a = await get(api, `/image/${cid}?w=64&format=auto`, accept ? { Accept: accept } : {});
      expect([accept, a.status, a.headers.get('content-type')]).toEqual([accept, 200, type]);
      expect(a.headers.get('vary')).toMatch(/accept/i);
      tags.add(`${cid} ${a.headers.get('etag')}`);
    }
    // Accept with avif;q=0 asks for what webp alone does, and no Accept what */* does.
    expect(tags.size).toBe(4);
  });

  test('the same CID in another form names the same derivative', async () => {
    const a = await get(api, `/image/${photo}?w=40`);
    const b = await get(api, `/image/${parseCid(photo).cid.toString(base36)}?w=40`);
    expect(b.headers.get('etag')).toBe(a.headers.get('etag'));
    expect(b.bytes.equals(a.bytes)).toBe(true);
  });
});

describe('animations', () => {
  let gif: string;
  beforeAll(async () => {
    gif = await upload(await animatedGif(4), 'anim.gif');
  });

  test('keep their frames as GIF (the source format) and as WebP', async () => {
    const asGif = await decoded(await get(api, `/image/${gif}?w=32`));
    expect(asGif).toMatchObject({ format: 'gif', width: 32, height: 16, pages: 4 });
    const asWebp = await decoded(await get(api, `/image/${gif}?w=32&format=webp`));
    expect(asWebp).toMatchObject({ format: 'webp', width: 32, height: 16, pages: 4 });
  });

  test('format=auto gives WebP to clients that take it, else GIF; never a still AVIF', async () => {
    const modern = await get(api, `/image/${gif}?w=32&format=auto`, { Accept: 'image/avif,image/webp,*/*' });
    expect(await decoded(modern)).toMatchObject({ format: 'webp', pages: 4 });
    const old = await get(api, `/image/${gif}?w=32&format=auto`, { Accept: '*/*' });
    expect(await decoded(old)).toMatchObject({ format: 'gif', pages: 4 });
  });

  test.each(['jpeg', 'png', 'avif'])('to %s is refused with 422 ANIMATED_IMAGE', async (format) => {
    const a = await get(api, `/image/${gif}?w=32&format=${format}`);
    expect(a.status).toBe(422);
    expect(a.json.error.reason).toBe('ANIMATED_IMAGE');
    expect(a.json.error.details).toMatch(/webp/);
  });
});

describe('what is not transformed', () => {
  test("without w, h or format: 302 to the original on its holder's gateway", async () => {
    const cid = await upload(await noise(20, 20).png().toBuffer());
    const { gatewayUrl } = (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body as { gatewayUrl: string };
    expect(gatewayUrl).toMatch(/^http:\/\/[a-z0-9]+\.localhost:\d+$/);
    for (const query of ['', '?quality=50', '?fit=fill']) {
      const a = await get(api, `/image/${cid}${query}`);
      expect(a.status).toBe(302);
      expect(a.headers.get('location')).toBe(`${gatewayUrl}/ipfs/${cid}`);
    }
  });

  test.each([
    ['w=10&foo=1', 'foo'],
    ['w=0', 'w'],
    ['w=4097', 'w'],
    ['h=-1', 'h'],
    ['w=1.5', 'w'],
    ['w=ten', 'w'],
    ['w=10&w=20', 'w'],
    ['quality=0&w=10', 'quality'],
    ['quality=101&w=10', 'quality'],
    ['format=gif', 'format'],
    ['w=10&fit=crop', 'fit'],
  ])('?%s is 400 INVALID_INPUT naming %s', async (query, name) => {
    const res = await call(api, 'GET', `/image/bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e?${query}`);
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_INPUT');
    expect(res.body.error.details).toContain(name);
  });

  test('not a CID: 400 INVALID_CID', async () => {
    const res = await call(api, 'GET', '/image/not-a-cid?w=10');
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_CID');
  });

  test('an image in Kubo that no account holds: 404, with or without transform (no open proxy)', async () => {
    const bytes = await noise(30, 30).png().toBuffer();
    const added = await kubo().add(bytes, { cidVersion: 1, rawLeaves: true, pin: false });
    for (const query of ['?w=10', '']) {
      const res = await call(api, 'GET', `/image/${added.cid.toString()}${query}`);
      expect(res.status).toBe(404);
      expect(errorReason(res)).toBe('NOT_FOUND');
    }
  });

  test('content held by a pin that is not fetched yet: 404 at once, not a wait on the network', async () => {
    const bytes = await noise(30, 30).png().toBuffer();
    const { cid } = await kubo().add(bytes, { cidVersion: 1, rawLeaves: true, onlyHash: true, pin: false });
    const pinned = await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid: cid.toString() } });
    expect(pinned.status).toBe(202);
    const started = Date.now();
    const res = await call(api, 'GET', `/image/${cid.toString()}?w=10`);
    expect(res.status).toBe(404);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  test('content that is no image: 415 NOT_AN_IMAGE, also instead of a redirect', async () => {
    const cid = await upload(Buffer.from('just some text, held by a user'), 'note.txt');
    for (const query of ['?w=10', '']) {
      const res = await call(api, 'GET', `/image/${cid}${query}`);
      expect(res.status).toBe(415);
      expect(errorReason(res)).toBe('NOT_AN_IMAGE');
    }
  });

  test('a decompression bomb is refused with 422 quickly and without decoding it', async () => {
    const cid = await upload(pngBomb(), 'bomb.png');
    const rssBefore = process.memoryUsage().rss;
    const started = Date.now();
    const res = await call(api, 'GET', `/image/${cid}?w=100`);
    const ms = Date.now() - started;
    expect(res.status).toBe(422);
    expect(errorReason(res)).toBe('IMAGE_TOO_LARGE');
    expect(res.body.error.details).toContain('50000x50000');
    expect(ms).toBeLessThan(2000);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 * 2 ** 20);
  });

  test('other methods: 405 with Allow', async () => {
    const res = await call(api, 'POST', '/image/bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e');
    expect(res.status).toBe(405);
    expect(errorReason(res)).toBe('METHOD_NOT_ALLOWED');
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('the cache', () => {
  test('a second identical request is a hit: no transform, the same bytes and ETag; If-None-Match is 304', async () => {
    const cid = await upload(await noise(120, 80).png().toBuffer());
    const path = `/image/${cid}?w=60&format=webp&quality=70`;
    const before = await transforms(api);
    const first = await get(api, path);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-image-cache')).toBe('miss');
    expect(await transforms(api)).toBe(before + 1);

    const second = await get(api, path);
    expect(second.headers.get('x-image-cache')).toBe('hit');
    expect(await transforms(api)).toBe(before + 1);
    expect(second.bytes.equals(first.bytes)).toBe(true);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    expect(second.headers.get('etag')).toBe(etag);
    for (const a of [first, second]) {
      expect(a.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(a.headers.get('content-type')).toBe('image/webp');
      expect(Number(a.headers.get('content-length'))).toBe(first.bytes.length);
    }
    // Parameters in another order, or spelled out as defaults, are the same derivative.
    expect((await get(api, `/image/${cid}?quality=70&format=webp&w=60&fit=cover`)).headers.get('etag')).toBe(etag);

    for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const unchanged = await get(api, path, { 'If-None-Match': header });
      expect([header, unchanged.status, unchanged.bytes.length]).toEqual([header, 304, 0]);
      expect(unchanged.headers.get('etag')).toBe(etag);
    }
    expect((await get(api, path, { 'If-None-Match': '"other"' })).status).toBe(200);
    expect(await transforms(api)).toBe(before + 1);
    expect(await metric(api, 'stupa_image_cache_hits_total')).toBeGreaterThan(0);
  });

  test('survives a restart: the index is rebuilt from the directory', async () => {
    const cid = await upload(await noise(90, 60).png().toBuffer());
    const path = `/image/${cid}?w=45`;
    expect((await get(api, path)).headers.get('x-image-cache')).toBe('miss');
    const again = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue(), DATA_DIR: api.deps.config.dataDir });
    try {
      const hit = await get(again, path);
      expect(hit.headers.get('x-image-cache')).toBe('hit');
      expect(await transforms(again)).toBe(0);
    } finally {
      await again.close();
    }
  });

  test('beyond IMAGE_CACHE_MB the least recently used derivative is evicted', async () => {
    const limit = 0.05 * 2 ** 20; // 52,428 bytes: two 80x80 noise PNGs (~19 KB each) fit, three do not
    const small = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue(), IMAGE_CACHE_MB: '0.05' });
    try {
      const cid = await upload(await noise(80, 80).png().toBuffer());
      const [a, b, c] = ['w=80', 'w=79', 'w=78'].map((q) => `/image/${cid}?${q}&format=png`);
      const state = async (path: string) => (await get(small, path)).headers.get('x-image-cache');
      const sizes = [(await get(small, a!)).bytes.length, (await get(small, b!)).bytes.length];
      expect(await state(a!)).toBe('hit'); // a is now the most recently used
      sizes.push((await get(small, c!)).bytes.length); // evicts b
      expect(sizes[0]! + sizes[1]!).toBeLessThanOrEqual(limit);
      expect(sizes[0]! + sizes[2]!).toBeLessThanOrEqual(limit);
      expect(sizes[0]! + sizes[1]! + sizes[2]!).toBeGreaterThan(limit);
      expect(await state(a!)).toBe('hit');
      expect(await state(c!)).toBe('hit');
      expect(await metric(small, 'stupa_image_cache_evictions_total')).toBe(1);
      expect(await state(b!)).toBe('miss'); // and now a goes
      expect(await metric(small, 'stupa_image_cache_evictions_total')).toBe(2);
      expect(await metric(small, 'stupa_image_cache_bytes')).toBeLessThanOrEqual(limit);
    } finally {
      await small.close();
    }
  });
});

describe('limits', () => {
  test('a source over IMAGE_MAX_SOURCE_MB is refused with 422 SOURCE_TOO_LARGE', async () => {
    const capped = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue(), IMAGE_MAX_SOURCE_MB: '0.01' });
    try {
      const cid = await upload(await noise(100, 100).png().toBuffer()); // ~30 KB
      const res = await call(capped, 'GET', `/image/${cid}?w=10`);
      expect(res.status).toBe(422);
      expect(errorReason(res)).toBe('SOURCE_TOO_LARGE');
    } finally {
      await capped.close();
    }
  });

  test('with the transforms and the queue full, more are refused with 503 and Retry-After', async () => {
    const narrow = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue(), IMAGE_CONCURRENCY: '1', IMAGE_QUEUE: '1' });
    try {
      // Each PNG of 1,400 px of noise takes sharp a good fraction of a second to encode.
      const cid = await upload(await noise(1500, 1000).jpeg({ quality: 95 }).toBuffer(), 'large.jpg');
      const answers = await Promise.all(
        [1400, 1399, 1398, 1397, 1396, 1395].map((w) => call(narrow, 'GET', `/image/${cid}?w=${w}&format=png`)),
      );
      const statuses = answers.map((a) => a.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(2);
      expect(statuses.filter((s) => s === 503)).toHaveLength(4);
      for (const refused of answers.filter((a) => a.status === 503)) {
        expect(errorReason(refused)).toBe('OVERLOADED');
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      expect(await metric(narrow, 'stupa_image_overloaded_total')).toBe(4);
      // Identical requests at once share one transform and do not queue.
      const before = await transforms(narrow);
      const same = await Promise.all([1, 2, 3, 4].map(() => call(narrow, 'GET', `/image/${cid}?w=1000&format=png`)));
      expect(same.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(await transforms(narrow)).toBe(before + 1);
    } finally {
      await narrow.close();
    }
  });
});

test('configuration: defaults, fractional megabytes, and every bad value named', () => {
  const config = testConfig();
  expect(config.images).toEqual({
    cacheDir: path.join(config.dataDir, 'image-cache'),
    cacheBytes: 1024 * 2 ** 20,
    maxSourceBytes: 50 * 2 ** 20,
    maxPixels: 50_000_000,
    concurrency: os.availableParallelism(),
    queue: 32,
  });
  expect(testConfig({ IMAGE_CACHE_MB: '0.5', IMAGE_CONCURRENCY: '3', IMAGE_QUEUE: '0' }).images).toMatchObject({
    cacheBytes: 512 * 1024,
    concurrency: 3,
    queue: 0,
  });
  let problems: string[] = [];
  try {
    testConfig({ IMAGE_CACHE_MB: 'lots', IMAGE_MAX_SOURCE_MB: '0', IMAGE_MAX_PIXELS: '1.5', IMAGE_CONCURRENCY: '0', IMAGE_QUEUE: '-1' });
  } catch (err) {
    problems = (err as ConfigError).problems;
  }
  for (const name of ['IMAGE_CACHE_MB', 'IMAGE_MAX_SOURCE_MB', 'IMAGE_MAX_PIXELS', 'IMAGE_CONCURRENCY', 'IMAGE_QUEUE']) {
    expect([name, problems.some((p) => p.startsWith(`${name}:`))]).toEqual([name, true]);
  }
});
