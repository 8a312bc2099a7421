// How a surface knows the edge (edge/caddyfile.ts) is asking for a decision: the request
// is for the decision path and carries the edge's secret; the reader's own method, URI and
// address are in the X-Forwarded-* headers the edge set.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { EDGE_SECRET_HEADER } from '../edge/protocol.js';

export interface EdgeRequest {
  method: string;
  uri: string;
  ip: string;
}

const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** The reader's request when this is the edge asking at `path`; null otherwise. */
export function edgeDecision(req: IncomingMessage, secret: string | null, path: string): EdgeRequest | null {
  const url = req.url ?? '';
  if (!secret || !(url === path || url.startsWith(`${path}?`))) return null;
  const given = Buffer.from(first(req.headers[EDGE_SECRET_HEADER]) ?? '');
  const expected = Buffer.from(secret);
  // Without the secret this path is an ordinary (unknown) path of the surface, answered as such.
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
  // Caddy sets X-Forwarded-For to the address it got the connection from, ignoring the
  // reader's own header (no trusted_proxies in its configuration).
  const ip = (first(req.headers['x-forwarded-for']) ?? '').split(',').pop()!.trim();
  return { method: first(req.headers['x-forwarded-method']) ?? 'GET', uri: first(req.headers['x-forwarded-uri']) ?? '/', ip };
}
