// GET /image/:cid: a photo-sized JPEG resized to WebP, three figures.
// 1. Cold: every request a parameter set not seen before (a width one pixel narrower than the
//    last), so each is read from Kubo and transformed, against raw sharp in this process on the
//    same source bytes with the same parameters and as many at a time. The goal, >= 0.9 of raw
//    sharp's rate: what the service adds around sharp (the holds check, the Kubo read, the
//    header check, the cache write, HTTP) is small beside the transform.
// 2. Warm: the same requests again, all cache hits (no Kubo, no sharp), against cold: >= 10x.
// 3. That warm did no image work: the API's stupa_image_transforms_total moved only by the
//    cold requests, and every warm answer said X-Image-Cache: hit.
// Cold and raw run in ROUNDS short rounds, alternating which goes first, and each rate is
// its requests over its summed time: both sides see the same bursts of other work on a
// shared machine (measured here: one side's best round alone moved the ratio by 0.3).
import os from 'node:os';
import sharp from 'sharp';
import type { BenchContext } from './harness.js';

export const IMAGE_WIDTH = 2400;
export const IMAGE_HEIGHT = 1600;
export const REQUESTS = 20;
export const ROUNDS = 6;
const QUALITY = 80;
/** Widths of round `round`: distinct across rounds, so every cold request is a new derivative. */
const widths = (round: number) => Array.from({ length: REQUESTS }, (_, i) => 800 - round * REQUESTS - i);

export interface ImagesResult {
  sourceBytes: number;
  concurrency: number;
  coldPerSecond: number;
  rawPerSecond: number;
  warmPerSecond: number;
  /** Transforms the API counted during the warm requests (should be 0), and warm answers that were not hits. */
  warmTransforms: number;
  warmMisses: number;
  /** Answers that were not 200. */
  failures: number;
}

/** Something like a photograph: gradients, shapes and a little grain (what JPEG and WebP are for). */
async function photo(): Promise<Buffer> {
  const shapes = Array.from(
    { length: 60 },
    (_, i) =>
      `<circle cx="${(i * 397) % IMAGE_WIDTH}" cy="${(i * 211) % IMAGE_HEIGHT}" r="${40 + ((i * 13) % 120)}" fill="hsl(${i * 37},70%,50%)" opacity="0.6"/>`,
  ).join('');
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${IMAGE_WIDTH}" height="${IMAGE_HEIGHT}"><defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">` +
    `<stop offset="0" stop-color="#1e90ff"/><stop offset="1" stop-color="#ff7f50"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/>${shapes}</svg>`;
  const grain = await sharp({
    create: { width: IMAGE_WIDTH, height: IMAGE_HEIGHT, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 0, sigma: 8 } },
  })
    .png()
    .toBuffer();
  return sharp(Buffer.from(svg))
    .composite([{ input: grain, blend: 'add' }])
    .jpeg({ quality: 88 })
    .toBuffer();
}

/** Runs `task` for every item, `concurrency` at a time; the seconds it took. */
async function timed<T>(items: T[], concurrency: number, task: (item: T) => Promise<void>): Promise<number> {
  const queue = [...items];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await task(item);
    }),
  );
  return (performance.now() - started) / 1000;
}

async function transformsCounted(ctx: BenchContext): Promise<number> {
  const text = await (await fetch(`${ctx.apiUrl}/metrics`, { signal: ctx.signal })).text();
  return [...text.matchAll(/^stupa_image_transforms_total(?:\{[^}]*\})? (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

export async function benchImages(ctx: BenchContext, say: (line: string) => void): Promise<ImagesResult> {
  const source = await photo();
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(source)], { type: 'image/jpeg' }), 'bench.jpg');
  const res = await fetch(`${ctx.apiUrl}/upload/new`, { method: 'POST', headers: { 'X-Api-Key': ctx.user.apiKey }, body: form });
  const uploaded = (await res.json()) as { cid?: string };
  if (res.status !== 201 || !uploaded.cid) throw new Error(`upload of the bench image: ${res.status} ${JSON.stringify(uploaded)}`);
  const cid = uploaded.cid;
  // The API's default IMAGE_CONCURRENCY: one transform per core.
  const concurrency = os.availableParallelism();
  say(
    `images: ${IMAGE_WIDTH}x${IMAGE_HEIGHT} JPEG (${Math.round(source.length / 1024)} KiB) ${cid}; ${REQUESTS} requests a round, ${concurrency} at a time`,
  );

  let failures = 0;
  const statuses = new Map<number, number>();
  const request = async (width: number): Promise<string | null> => {
    const answer = await fetch(`${ctx.apiUrl}/image/${cid}?w=${width}&format=webp&quality=${QUALITY}`, { signal: ctx.signal });
    await answer.arrayBuffer();
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    if (answer.status !== 200) failures++;
    return answer.headers.get('x-image-cache');
  };
  const raw = async (width: number): Promise<void> => {
    await sharp(source).resize({ width, withoutEnlargement: true }).webp({ quality: QUALITY }).toBuffer();
  };

  const cold = async (w: number) => void (await request(w));
  // Warm-up, not counted: JIT, libvips, connections, the source's first read, on widths no round uses.
  await timed(widths(ROUNDS).slice(0, 4), concurrency, cold);
  await timed(widths(ROUNDS).slice(0, 4), concurrency, raw);

  let coldSeconds = 0;
  let rawSeconds = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const [first, second] = round % 2 === 0 ? [raw, cold] : [cold, raw];
    const a = await timed(widths(round), concurrency, first);
    const b = await timed(widths(round), concurrency, second);
    const [r, c] = round % 2 === 0 ? [a, b] : [b, a];
    rawSeconds += r;
    coldSeconds += c;
    say(`images: round ${round + 1}: cold ${(REQUESTS / c).toFixed(1)}/s, raw sharp ${(REQUESTS / r).toFixed(1)}/s`);
  }
  const coldPerSecond = (ROUNDS * REQUESTS) / coldSeconds;
  const rawPerSecond = (ROUNDS * REQUESTS) / rawSeconds;

  const before = await transformsCounted(ctx);
  let warmMisses = 0;
  const all = Array.from({ length: ROUNDS }, (_, round) => widths(round)).flat();
  const warmPerSecond =
    all.length /
    (await timed(all, concurrency, async (w) => {
      if ((await request(w)) !== 'hit') warmMisses++;
    }));
  const warmTransforms = (await transformsCounted(ctx)) - before;
  say(
    `images: warm ${warmPerSecond.toFixed(0)}/s (${all.length} requests, ${warmTransforms} transforms); statuses ${JSON.stringify([...statuses])}`,
  );
  return { sourceBytes: source.length, concurrency, coldPerSecond, rawPerSecond, warmPerSecond, warmTransforms, warmMisses, failures };
}
