// GET /image/:cid: image derivatives (core/images.ts), without an API key so that
// `<img src>` works. Content no account holds is 404; what a derivative is made of is in the
// use-case. Derivatives are immutable (a new source is a new CID), so they are cached by
// clients and CDNs for a year and revalidated by ETag.
import { Router } from 'express';
import { Counter, Gauge, type Registry } from 'prom-client';
import { cidInput } from '../../core/content.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createImages, imageQuery } from '../../core/images.js';
import { resource, type RouterOptions } from './http/routing.js';
import { parse } from './http/validate.js';

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The entity tags of If-None-Match, weak or strong alike (RFC 9110: weak comparison), or `*`. */
function entityTags(header: string | undefined): string[] {
  if (!header) return [];
  if (header.trim() === '*') return ['*'];
  return [...header.matchAll(/(?:W\/)?("[^"]*")/g)].map((m) => m[1]!);
}

/** The use-case's observations as metrics of the app's registry: whether sharp ran, and the cache. */
function imageMetrics(registry: Registry | undefined) {
  const registers = registry ? [registry] : [];
  const transforms = new Counter({
    name: 'stupa_image_transforms_total',
    help: 'Image derivatives made with sharp (cache misses that were transformed), by output format',
    labelNames: ['format'] as const,
    registers,
  });
  const hits = new Counter({ name: 'stupa_image_cache_hits_total', help: 'Image requests answered from the disk cache', registers });
  const misses = new Counter({ name: 'stupa_image_cache_misses_total', help: 'Image requests not in the disk cache', registers });
  const evictions = new Counter({
    name: 'stupa_image_cache_evictions_total',
    help: 'Derivatives evicted from the disk cache (least recently used) to stay under IMAGE_CACHE_MB',
    registers,
  });
  const overloaded = new Counter({
    name: 'stupa_image_overloaded_total',
    help: 'Image requests refused with 503 because IMAGE_CONCURRENCY transforms ran and IMAGE_QUEUE waited',
    registers,
  });
  return {
    observer: {
      transformed: (format: string) => transforms.inc({ format }),
      hit: () => hits.inc(),
      miss: () => misses.inc(),
      evicted: () => evictions.inc(),
      overloaded: () => overloaded.inc(),
    },
    /** The cache's size, read when scraped. */
    gauge(stats: () => Promise<{ bytes: number }>) {
      new Gauge({
        name: 'stupa_image_cache_bytes',
        help: 'Bytes of derivatives in the disk cache',
        registers,
        async collect() {
          this.set((await stats()).bytes);
        },
      });
    },
  };
}

export function imageRoutes(deps: UseCaseDeps, options: RouterOptions & { registry?: Registry }): Router {
  const router = Router();
  const metrics = imageMetrics(options.registry);
  const images = createImages(deps, metrics.observer);
  metrics.gauge(() => images.cache.stats());

  resource(router, '/image/:cid', {
    get: async (req, res) => {
      const cid = cidInput(String(req.params.cid));
      const query = parse(imageQuery, req.query, 'query');
      const answer = await images.get({
        cid,
        query,
        accept: req.headers.accept,
        known: entityTags(req.headers['if-none-match']),
      });
      if (answer.kind === 'original') {
        res.status(302).location(answer.location).end();
        return;
      }
      res.set({ ETag: answer.etag, 'Cache-Control': IMMUTABLE });
      if (answer.variesByAccept) res.vary('Accept');
      if (answer.kind === 'unchanged') {
        res.status(304).end();
        return;
      }
      res.set('X-Image-Cache', answer.cache).type(answer.contentType).send(answer.bytes);
    },
  });
  return router;
}
