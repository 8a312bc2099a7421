// The image tests' API (tests/images.test.ts, images-cache.test.ts): the file's API process and
// a user, started before its tests (useImageApi) and stopped after them, the bindings set once
// they start; images made with sharp here, uploaded as that user, and the answers decoded again.
import zlib from 'node:zlib';
import sharp from 'sharp';
import type { ApiServer } from '../../api/server.js';
import { multipart, postStream } from './content.js';
import { call, createUser, startTestApi, type TestUser } from './stack.js';
import { testTaskQueue } from './worker.js';

export let api: ApiServer;
export let user: TestUser;

export function useImageApi(): void {
  beforeAll(async () => {
    api = await startTestApi({ TEMPORAL_TASK_QUEUE: testTaskQueue() });
    user = await createUser(api);
  });
  afterAll(() => api?.close());
}

export async function upload(bytes: Buffer, name = 'image.png'): Promise<string> {
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

export interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: any;
}

/** A GET that does not follow redirects, with the body as bytes (and as JSON when it is). */
export async function get(server: ApiServer, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, { headers, redirect: 'manual' });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) json = JSON.parse(bytes.toString('utf8'));
  return { status: res.status, headers: res.headers, bytes, json };
}

export async function decoded(a: Answer) {
  expect(a.status).toBe(200);
  const meta = await sharp(a.bytes, { animated: true }).metadata();
  return { width: meta.width, height: meta.pageHeight ?? meta.height, format: meta.format, pages: meta.pages ?? 1, meta };
}

/** A metric's total over its labels, from GET /metrics. */
export async function metric(server: ApiServer, name: string): Promise<number> {
  const text = (await call(server, 'GET', '/metrics')).text;
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+(?:\\.\\d+)?)$`, 'gm'))].reduce((sum, m) => sum + Number(m[1]), 0);
}
export const transforms = (server: ApiServer) => metric(server, 'stupa_image_transforms_total');

export const noise = (width: number, height: number, channels: 3 | 4 = 3) =>
  sharp({ create: { width, height, channels, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } } });

/** An animated GIF of `frames` frames of 64x32, each a different colour. */
export async function animatedGif(frames: number): Promise<Buffer> {
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
export function pngBomb(): Buffer {
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
