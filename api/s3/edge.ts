// S3's side of the edge (edge/caddyfile.ts). Every GET reaches this surface first as a
// decision (a GET of /_edge/s3 carrying the reader's headers and, in X-Forwarded-*, its method
// and URI): the request is authenticated and routed as the reader sent it, and every answer is
// the surface's own — an error, a listing, a 304 — which the edge passes on unchanged. Only
// GetObject's bytes of a large object (or a range of any) are left to the edge: the answer then
// carries the object's headers, the Kubo path and the range, and no body; the edge copies the
// headers to the reader and streams the bytes from Kubo's gateway. Small whole objects are
// answered here from the small-answer memory (api/answers.ts), which costs less than a second
// trip through the edge to Kubo.
import type { IncomingMessage } from 'node:http';
import { EDGE_HEADERS, EDGE_S3_DECISION_PATH, EDGE_SECRET_HEADER } from '../../edge/protocol.js';
import { edgeDecision } from '../edge.js';

/** Whether the edge asks: the request then stands for the reader's (its method and URI). */
export function takeEdgeDecision(req: IncomingMessage, secret: string | null): boolean {
  const edge = edgeDecision(req, secret, EDGE_S3_DECISION_PATH);
  if (!edge) return false;
  req.method = edge.method;
  req.url = edge.uri;
  const edgeOwn = ['x-forwarded-method', 'x-forwarded-uri', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', EDGE_SECRET_HEADER];
  for (const name of edgeOwn) {
    delete req.headers[name];
  }
  return true;
}

/** The decision's headers for bytes the edge serves: the object's `headers` (no length: the
 * answer has no body; Kubo's length and Content-Range are the reader's) and where to read. */
export function edgeObjectHeaders(
  headers: Record<string, string>,
  cid: string,
  range: { start: number; end: number } | undefined,
): Record<string, string> {
  const out = { ...headers };
  delete out['content-length'];
  delete out['content-range'];
  // With a query part, empty: the edge's rewrite would otherwise keep the reader's query.
  out[EDGE_HEADERS.path] = `/ipfs/${cid}?`;
  out[EDGE_HEADERS.range] = range ? `bytes=${range.start}-${range.end}` : 'none';
  return out;
}
