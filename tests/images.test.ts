// GET /image/:cid against the real stack: images made with sharp here, uploaded as a user,
// transformed by the API in-process, and decoded again with sharp to check what came back:
// transforms, animations, and what is not transformed. The cache and the limits are
// tests/images-cache.test.ts.
import { base36 } from 'multiformats/bases/base36';
import sharp from 'sharp';
import { parseCid } from '../infra/ipfs/cid.js';
import { kubo } from './support/content.js';
import { call, errorReason } from './support/stack.js';
import { animatedGif, api, decoded, get, noise, pngBomb, upload, useImageApi, user } from './support/images.js';

useImageApi();

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
