// GET /image/:cid's cache and limits against the real stack: a hit is no transform and the same
// bytes, the cache survives a restart and evicts the least recently used past IMAGE_CACHE_MB;
// sources too large, a full queue, and the configuration's values.
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../infra/errors.js';
import { call, errorReason, startTestApi, testConfig } from './support/stack.js';
import { testTaskQueue } from './support/worker.js';
import { api, get, metric, noise, transforms, upload, useImageApi } from './support/images.js';

useImageApi();

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
