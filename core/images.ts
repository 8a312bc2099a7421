// Image derivatives of held content (GET /image/:cid): resized and re-encoded with sharp,
// cached on disk by a key that names everything the bytes depend on (infra/image-cache.ts).
//
// The service is no open proxy: only content some account holds is read. A request is
// answered in the cheapest way that is right: 404 for content nobody holds, then `unchanged`
// when the client already has the entity (the tag is the key, known before any work), then a
// cache hit (one file read, no Kubo, no sharp), and only then a transform, which is bounded
// three ways: the source's bytes (read with a cap), its pixels (from the header, before any
// pixel is decoded: a decompression bomb is refused in milliseconds), and how many transforms
// run and wait at once (beyond the queue: 503 with Retry-After). Around the transform, what
// a page of images repeats is remembered briefly: that content is held (a second), and the
// sources just read (for the other sizes and formats of the same image asked next).
import crypto from 'node:crypto';
import { fileTypeFromBuffer } from 'file-type';
import pLimit from 'p-limit';
import sharp, { type Metadata, type Sharp } from 'sharp';
import { z } from 'zod';
import type { ParsedCid } from '../infra/ipfs/cid.js';
import { IMAGE_AVIF_EFFORT, IMAGE_SOURCE_MEMORY_BYTES, SNIFF_BYTES } from '../infra/constants.js';
import { createImageCache, type ImageCache } from '../infra/image-cache.js';
import type { UseCaseDeps } from './deps.js';
import { contentLinkBase } from './gateway.js';
import { createHeldMemory } from './held.js';
import { NotFound, Overloaded, Unavailable, UnsupportedContent, Unprocessable } from './errors.js';

type ImageDeps = Pick<UseCaseDeps, 'config' | 'db' | 'kubo'>;

export const FITS = ['cover', 'contain', 'fill', 'inside', 'outside'] as const;
export const FORMATS = ['webp', 'jpeg', 'png', 'avif', 'auto'] as const;
export const MAX_DIMENSION = 4096;
export const DEFAULT_QUALITY = 80;

type Fit = (typeof FITS)[number];
type Output = 'jpeg' | 'png' | 'webp' | 'avif' | 'gif';

const whole = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,5}$/, `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

/** The query of GET /image/:cid; any other parameter is refused, by name. */
export const imageQuery = z.strictObject({
  w: whole(1, MAX_DIMENSION).optional(),
  h: whole(1, MAX_DIMENSION).optional(),
  format: z.enum(FORMATS).optional(),
  quality: whole(1, 100).default(DEFAULT_QUALITY),
  fit: z.enum(FITS).default('cover'),
});
export type ImageQuery = z.infer<typeof imageQuery>;

export interface ImageRequest {
  cid: ParsedCid;
  query: ImageQuery;
  /** The request's Accept header, for `format=auto`. */
  accept?: string;
  /** Entity tags the client already has (If-None-Match), or `*`. */
  known?: string[];
}

export type ImageAnswer =
  /** No transform asked for: the original, on the gateway. */
  | { kind: 'original'; location: string }
  | { kind: 'unchanged'; etag: string; variesByAccept: boolean }
  | { kind: 'image'; etag: string; variesByAccept: boolean; contentType: string; bytes: Buffer; cache: 'hit' | 'miss' };

/** What operators and tests see of the work done (the REST layer makes them metrics). */
export interface ImageObserver {
  transformed?(format: string, seconds: number): void;
  hit?(): void;
  miss?(): void;
  evicted?(): void;
  overloaded?(): void;
}

const MIME: Record<Output, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  avif: 'image/avif',
  gif: 'image/gif',
};
const EXT: Record<Output, string> = { jpeg: 'jpg', png: 'png', webp: 'webp', avif: 'avif', gif: 'gif' };
const BY_EXT = new Map(Object.entries(EXT).map(([format, ext]) => [ext, format as Output]));
/** What file-type recognises that sharp's prebuilt libvips decodes (HEIC needs HEVC: not there). */
const SOURCE_MIMES = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'image/tiff']);
const SOURCE_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'heif', 'tiff']);
const WHITE = { r: 255, g: 255, b: 255, alpha: 1 };
const TRANSPARENT = { r: 0, g: 0, b: 0, alpha: 0 };
/** Part of every key: a new encoder (or a change here) makes new bytes, so new keys and tags. */
const RECIPE = `stupa-image/1 sharp ${sharp.versions.sharp} vips ${sharp.versions.vips} avif-effort ${IMAGE_AVIF_EFFORT}`;
/** A source that Kubo does not deliver within this is a Kubo problem (held content is local). */
const READ_TIMEOUT_MS = 30_000;

/**
 * What the output depends on besides the source, normalised so that equal outputs share a
 * key: `fit` only with both dimensions (with one, every fit keeps the aspect ratio), quality
 * not for PNG (lossless), and `format=auto` reduced to which of AVIF and WebP the client takes.
 */
interface Plan {
  width?: number;
  height?: number;
  fit?: Fit;
  /** An explicit format, the source's own (`same`), or `auto` with what Accept allows. */
  target: 'jpeg' | 'png' | 'webp' | 'avif' | 'same' | 'auto';
  /** For `auto`: whether the client takes AVIF and WebP. */
  takes?: { avif: boolean; webp: boolean };
  quality?: number;
}

/** Whether the Accept header names this media type with a non-zero q. Wildcards do not count:
 * browsers that decode AVIF or WebP say so, and `*\/*` alone says nothing about them. */
function accepts(accept: string | undefined, type: string): boolean {
  return (accept ?? '').split(',').some((range) => {
    const [name, ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    if (name !== type) return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

function planOf({ query, accept }: ImageRequest): Plan | undefined {
  const { w: width, h: height, format, quality, fit } = query;
  if (width === undefined && height === undefined && format === undefined) return undefined;
  const target = format ?? 'same';
  return {
    width,
    height,
    fit: width !== undefined && height !== undefined ? fit : undefined,
    target,
    takes: target === 'auto' ? { avif: accepts(accept, 'image/avif'), webp: accepts(accept, 'image/webp') } : undefined,
    quality: target === 'png' ? undefined : quality,
  };
}

function keyOf(cid: ParsedCid, plan: Plan): string {
  const takes = plan.takes ? ` avif ${plan.takes.avif} webp ${plan.takes.webp}` : '';
  const text = `${RECIPE}\ncid ${cid.v1} w ${plan.width ?? '-'} h ${plan.height ?? '-'} fit ${plan.fit ?? '-'} to ${plan.target}${takes} q ${plan.quality ?? '-'}`;
  return crypto.createHash('sha256').update(text).digest('hex');
}

/** The output format for this source: animations stay animations or are refused, never flattened. */
function outputOf(plan: Plan, meta: Metadata, animated: boolean): Output {
  const source = meta.format;
  const legacy: Output = source === 'png' || source === 'gif' || meta.hasAlpha ? 'png' : 'jpeg';
  const { target } = plan;
  if (target === 'same') {
    if (source === 'heif') return 'avif';
    return source === 'jpeg' || source === 'png' || source === 'webp' || source === 'gif' ? source : legacy;
  }
  if (target === 'jpeg' || target === 'png' || target === 'webp' || target === 'avif') {
    if (animated && target !== 'webp') {
      throw new Unprocessable(
        'ANIMATED_IMAGE',
        `the image is animated (${meta.pages} frames) and ${target} cannot keep the animation: ask for format=webp or format=auto, or leave format out`,
      );
    }
    return target;
  }
  // auto: AVIF over WebP over what every client takes; an animation as WebP or else GIF.
  const takes = plan.takes ?? { avif: false, webp: false };
  if (animated) return takes.webp ? 'webp' : 'gif';
  return takes.avif ? 'avif' : takes.webp ? 'webp' : legacy;
}

/**
 * The first `length` bytes of the content from Kubo, offline: held content is local, except
 * a pin still being fetched, and a request must not hold a transform slot while Kubo searches
 * the network for it. Kubo's refusal means the content is not here yet, or no file (a
 * directory); no answer at all means Kubo is down.
 */
async function* cat(deps: ImageDeps, cid: ParsedCid, length: number): AsyncGenerator<Uint8Array> {
  // `offline` is Kubo's global flag, which the client passes on as it is.
  const options = { length, offline: true, signal: AbortSignal.timeout(READ_TIMEOUT_MS) };
  try {
    yield* deps.kubo.cat(cid.cid, options);
  } catch (err) {
    if ((err as Error).name !== 'HTTPError') throw new Unavailable('kubo');
    const message = (err as Error).message;
    if (/not found locally/.test(message)) throw new NotFound('content');
    throw new UnsupportedContent('NOT_AN_IMAGE', `the content cannot be read as a file: ${message.slice(0, 200)}`);
  }
}

/** Enough of the content's start to tell what it is. */
async function readHead(deps: ImageDeps, cid: ParsedCid): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const chunk of cat(deps, cid, SNIFF_BYTES)) parts.push(chunk);
  return Buffer.concat(parts);
}

/** Reads at most `maxBytes` of the content, refusing what is not an image from its first bytes. */
async function readSource(deps: ImageDeps, cid: ParsedCid, maxBytes: number): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let size = 0;
  let sniffed = false;
  for await (const chunk of cat(deps, cid, maxBytes + 1)) {
    parts.push(chunk);
    size += chunk.length;
    if (!sniffed && size >= SNIFF_BYTES) {
      sniffed = true;
      await assertImage(Buffer.concat(parts));
    }
    if (size > maxBytes) {
      throw new Unprocessable('SOURCE_TOO_LARGE', `the image is larger than IMAGE_MAX_SOURCE_MB (${(maxBytes / 2 ** 20).toFixed(1)} MB)`);
    }
  }
  const source = Buffer.concat(parts);
  if (!sniffed) await assertImage(source);
  return source;
}

async function assertImage(head: Uint8Array): Promise<void> {
  const type = await fileTypeFromBuffer(head.subarray(0, SNIFF_BYTES));
  if (type && SOURCE_MIMES.has(type.mime)) return;
  throw new UnsupportedContent(
    type?.mime.startsWith('image/') ? 'UNSUPPORTED_IMAGE' : 'NOT_AN_IMAGE',
    `the content is ${type ? type.mime : 'not a recognised image'}; images are JPEG, PNG, WebP, GIF, AVIF or TIFF`,
  );
}

/** The source's header, read without decoding a pixel; refuses what is too large to decode. */
async function inspect(source: Buffer, maxPixels: number): Promise<{ meta: Metadata; animated: boolean }> {
  let meta: Metadata;
  try {
    // `animated`: the height is that of all frames, so the pixel count is that of the animation.
    meta = await sharp(source, { animated: true, limitInputPixels: false }).metadata();
  } catch {
    throw new Unprocessable('INVALID_IMAGE', 'the image cannot be read: it is damaged or truncated');
  }
  if (!SOURCE_FORMATS.has(meta.format ?? '') || (meta.format === 'heif' && meta.compression !== 'av1')) {
    throw new UnsupportedContent('UNSUPPORTED_IMAGE', `${meta.format ?? 'this'} images are not supported`);
  }
  const pages = meta.pages ?? 1;
  const pixels = meta.width * meta.height;
  if (pixels > maxPixels) {
    const frame = `${meta.width}x${meta.pageHeight ?? meta.height}${pages > 1 ? ` in ${pages} frames` : ''}`;
    throw new Unprocessable(
      'IMAGE_TOO_LARGE',
      `the image is ${frame}, ${(pixels / 1e6).toFixed(1)} megapixels; at most ${(maxPixels / 1e6).toFixed(1)} are decoded`,
    );
  }
  return { meta, animated: pages > 1 && (meta.format === 'gif' || meta.format === 'webp') };
}

async function transform(source: Buffer, plan: Plan, maxPixels: number): Promise<{ bytes: Buffer; output: Output }> {
  const { meta, animated } = await inspect(source, maxPixels);
  const output = outputOf(plan, meta, animated);
  // The pixel limit again, now enforced by libvips itself while it decodes.
  let image: Sharp = sharp(source, { animated, limitInputPixels: maxPixels }).autoOrient();
  if (plan.width !== undefined || plan.height !== undefined) {
    image = image.resize({
      width: plan.width,
      height: plan.height,
      fit: plan.fit ?? 'inside',
      withoutEnlargement: true,
      // `contain` letterboxes: transparent where the format has alpha, white in JPEG.
      background: output === 'jpeg' ? WHITE : TRANSPARENT,
    });
  }
  const quality = plan.quality ?? DEFAULT_QUALITY;
  if (output === 'jpeg') image = image.flatten({ background: WHITE }).jpeg({ quality });
  else if (output === 'webp') image = image.webp({ quality });
  else if (output === 'avif') image = image.avif({ quality, effort: IMAGE_AVIF_EFFORT });
  else if (output === 'gif') image = image.gif();
  else image = image.png();
  try {
    return { bytes: await image.toBuffer(), output };
  } catch (err) {
    const message = (err as Error).message;
    if (/pixel limit/i.test(message)) throw new Unprocessable('IMAGE_TOO_LARGE', 'the image has more pixels than are decoded');
    throw new Unprocessable('INVALID_IMAGE', `the image cannot be decoded: ${message.split('\n')[0]!.slice(0, 200)}`);
  }
}

/**
 * Sources read lately, least recently used beyond IMAGE_SOURCE_MEMORY_BYTES: `srcset` and
 * `format=auto` ask for several derivatives of one new image at once, and each would read it
 * from Kubo again. Reads of one source at once share one.
 */
function sourceMemory(deps: ImageDeps, maxSourceBytes: number) {
  const kept = new Map<string, Buffer>();
  const reading = new Map<string, Promise<Buffer>>();
  let total = 0;
  return {
    read(cid: ParsedCid): Promise<Buffer> {
      const known = kept.get(cid.v1);
      if (known) {
        kept.delete(cid.v1);
        kept.set(cid.v1, known);
        return Promise.resolve(known);
      }
      let read = reading.get(cid.v1);
      if (!read) {
        read = readSource(deps, cid, maxSourceBytes).finally(() => reading.delete(cid.v1));
        reading.set(cid.v1, read);
        void read.then(
          (bytes) => {
            if (bytes.length > IMAGE_SOURCE_MEMORY_BYTES / 4 || kept.has(cid.v1)) return;
            kept.set(cid.v1, bytes);
            total += bytes.length;
            for (const [key, old] of kept) {
              if (total <= IMAGE_SOURCE_MEMORY_BYTES) break;
              kept.delete(key);
              total -= old.length;
            }
          },
          () => undefined,
        );
      }
      return read;
    },
  };
}

/** The derivative use-case with its state: the disk cache, the transform slots and queue, and
 * the transforms in flight (identical requests at once share one). */
export function createImages(deps: ImageDeps, observe: ImageObserver = {}) {
  const { cacheDir, cacheBytes, maxSourceBytes, maxPixels, concurrency, queue } = deps.config.images;
  const cache: ImageCache = createImageCache({ dir: cacheDir, maxBytes: cacheBytes, onEvict: observe.evicted });
  const slots = pLimit(concurrency);
  const inFlight = new Map<string, Promise<{ bytes: Buffer; output: Output }>>();
  /** Seconds a transform takes, on average lately: what Retry-After is made of. */
  let averageS = 0.1;
  const held = createHeldMemory(deps.db);
  const sources = sourceMemory(deps, maxSourceBytes);

  function render(cid: ParsedCid, plan: Plan, key: string): Promise<{ bytes: Buffer; output: Output }> {
    const running = inFlight.get(key);
    if (running) return running;
    if (slots.activeCount + slots.pendingCount >= concurrency + queue) {
      observe.overloaded?.();
      const waitS = Math.ceil(((slots.pendingCount + 1) / concurrency) * averageS);
      throw new Overloaded(
        `${slots.activeCount} image transforms run and ${slots.pendingCount} wait; retry shortly`,
        Math.min(30, Math.max(1, waitS)),
      );
    }
    const work = slots(async () => {
      const started = performance.now();
      const source = await sources.read(cid);
      const result = await transform(source, plan, maxPixels);
      const seconds = (performance.now() - started) / 1000;
      averageS = 0.8 * averageS + 0.2 * seconds;
      observe.transformed?.(result.output, seconds);
      await cache.put(key, EXT[result.output], result.bytes);
      return result;
    }).finally(() => inFlight.delete(key));
    inFlight.set(key, work);
    return work;
  }

  return {
    cache,

    async get(request: ImageRequest): Promise<ImageAnswer> {
      const { cid } = request;
      const holder = await held.holder(cid.multihash);
      if (!holder) throw new NotFound('content');
      const plan = planOf(request);
      if (!plan) {
        // Nothing to transform: the original, if it is an image (this is no general redirector).
        await assertImage(await readHead(deps, cid));
        return { kind: 'original', location: `${await contentLinkBase(deps, holder)}/ipfs/${cid.v1}` };
      }
      const key = keyOf(cid, plan);
      const etag = `"${key}"`;
      const variesByAccept = plan.target === 'auto';
      if (request.known?.some((tag) => tag === etag || tag === '*')) return { kind: 'unchanged', etag, variesByAccept };

      const cached = await cache.get(key);
      if (cached) {
        observe.hit?.();
        const format = BY_EXT.get(cached.ext) ?? 'jpeg';
        return { kind: 'image', etag, variesByAccept, contentType: MIME[format], bytes: cached.bytes, cache: 'hit' };
      }
      observe.miss?.();
      const { bytes, output } = await render(cid, plan, key);
      return { kind: 'image', etag, variesByAccept, contentType: MIME[output], bytes, cache: 'miss' };
    },
  };
}

export type Images = ReturnType<typeof createImages>;
