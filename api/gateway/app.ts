// The gateway: a surface of its own on GATEWAY_PORT. Each account's gateway is a subdomain,
// `<slug>.<domain>` (an origin per account, so one account's pages cannot script another's),
// serving `/ipfs/<cid>[/path]`, `/ipns/<name>[/path]` and `/folders/<name>[/path]` from the
// stack's Kubo gateway (infra/ipfs/kubo-gateway.ts) once the account's rules admit the reader and
// the account holds the content. Bytes stream through; every byte sent counts against the
// account's bandwidth.
//
// A plain node:http handler, not Express: a gateway answers many small reads, and Express's
// router and request decoration cost about half of the API's CPU per 4 KiB read (measured with
// `npm run bench -- --gateway`: 0.81 CPU ms per request with Express, 0.40 without). The
// routes are three prefixes; errors are answered by errors.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FORWARDED_RESPONSE, type KuboGateway } from '../../infra/ipfs/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import { HttpError } from '../http.js';
import type { BandwidthMeter } from '../../core/bandwidth.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { NotFound, Unavailable } from '../../core/errors.js';
import {
  admitReader,
  findGatewayFolder,
  gatewayCors,
  gatewayTarget,
  openAccountGateway,
  type GatewayAccount,
  type GatewayNamespace,
} from '../../core/gateway.js';
import type { HeldMemory } from '../../core/held.js';
import { createAnswerMemory, type AnswerMemory, type KeptAnswer } from '../answers.js';
import { servesHostName } from '../../core/edge.js';
import { edgeDecision } from '../edge.js';
import { EDGE_KEEP_HEADER } from '../../edge/protocol.js';
import { allowAtEdge, EDGE_DECISION_PATH, EDGE_TLS_ASK_PATH } from './edge.js';
import { sendError } from './errors.js';

export interface GatewayDeps extends Pick<UseCaseDeps, 'db' | 'config'> {
  logger: Logger;
  kuboGateway: KuboGateway;
  bandwidth: BandwidthMeter;
  held: HeldMemory;
}

const SLUG = /^[a-z][a-z0-9]{0,62}$/;
const PATH = /^\/(ipfs|ipns|folders)\/([^/?]+)(\/[^?]*)?$/;

/** The account a request's Host names: `<slug>.<domain>[:port]`. */
function slugOf(host: string | undefined, domain: string): string | null {
  const name = (host ?? '').replace(/:\d+$/, '').toLowerCase();
  if (!name.endsWith(`.${domain}`)) return null;
  const slug = name.slice(0, -domain.length - 1);
  return SLUG.test(slug) ? slug : null;
}

/** The query Kubo's gateway is given: `format`, `filename`, `download`; never the token. */
function kuboQuery(query: URLSearchParams): string {
  const params = new URLSearchParams();
  for (const name of ['format', 'filename', 'download']) {
    const value = query.get(name);
    if (value !== null) params.set(name, value);
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'INVALID_PATH', 'the path is not properly percent-encoded');
  }
}

/** Adds names to the response's Vary. */
function vary(res: ServerResponse, value: string): void {
  const current = res.getHeader('vary');
  res.setHeader('vary', current ? `${String(current)}, ${value}` : value);
}

export function createGatewayHandler(deps: GatewayDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { config, logger } = deps;
  const answers = createAnswerMemory();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The edge asks for an access decision with the reader's request in X-Forwarded-* headers.
    const edge = edgeDecision(req, config.edge.secret, EDGE_DECISION_PATH);
    if (!edge && req.url?.startsWith(EDGE_TLS_ASK_PATH)) {
      const name = new URL(req.url, 'http://gateway').searchParams.get('domain') ?? '';
      res.writeHead((await servesHostName(deps, name)) ? 200 : 404, { 'Content-Length': '0' }).end();
      return;
    }
    const method = edge?.method ?? req.method ?? 'GET';
    const url = new URL(edge?.uri ?? req.url ?? '/', 'http://gateway');
    const slug = slugOf(req.headers.host, config.gateway.domain);
    if (!slug) throw new NotFound(`gateway for this host; accounts' gateways are <slug>.${config.gateway.domain}`);
    const account = await openAccountGateway(deps, slug);
    const match = PATH.exec(url.pathname);
    const namespace = match?.[1] as GatewayNamespace | undefined;
    const folder = namespace === 'folders' ? await findGatewayFolder(deps, account, decoded(match![2]!)) : undefined;

    // Whether this origin may read it from a browser (a folder's CORS document under /folders).
    const preflight = method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    const cors = await gatewayCors(deps, account, {
      origin: req.headers.origin,
      method: preflight ? String(req.headers['access-control-request-method']) : method,
      preflight,
      requestHeaders: req.headers['access-control-request-headers'],
      folder,
    });
    for (const [name, value] of Object.entries(cors)) {
      if (name === 'Vary') vary(res, value);
      else res.setHeader(name, value);
    }
    if (method === 'OPTIONS') {
      res.writeHead(204).end();
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed; use GET or HEAD`, { Allow: 'GET, HEAD, OPTIONS' });
    }
    if (!match || !namespace) {
      throw new NotFound(
        `path ${url.pathname}; this gateway serves /ipfs/<cid>[/path], /ipns/<name>[/path] and /folders/<top-level folder name>[/path]`,
      );
    }

    const token = (req.headers['x-gateway-token'] as string | undefined) || url.searchParams.get('token') || undefined;
    await admitReader(deps, account, { ip: edge?.ip ?? req.socket.remoteAddress ?? '', token });
    await deps.bandwidth.assertLeft(account.user._id, account.plan);
    const id = decoded(match[2]!);
    const target = await gatewayTarget(deps, deps.held, account, namespace, id, folder);
    // The path inside the content as the reader sent it (still percent-encoded), slashes kept.
    const upstreamPath = `/ipfs/${target.cid}${match[3] ?? ''}${kuboQuery(url.searchParams)}`;
    const key = answers.keyOf(upstreamPath, method, req.headers);
    // A kept answer of a CID the edge may answer again itself; one of a name (whose target moves) it may not.
    const keepAtEdge = edge && namespace === 'ipfs' ? account.user._id : null;
    const ctx: RelayContext = { namespace, id, target, account, bandwidth: deps.bandwidth, answers, key, keepAtEdge };
    const kept = key ? answers.get(key) : undefined;
    if (kept) return sendKept(req, res, kept, ctx);
    // Behind the edge, an answer that may be kept is read from Kubo here first: a small one is
    // answered (through the edge) and kept, so the next is answered from memory. Every other
    // read is left to the edge, which serves its bytes from Kubo.
    const atEdge = () => allowAtEdge(res, { account: account.user._id, upstreamPath, namespace, id, target, cors });
    if (edge && (!key || answers.isLarge(key))) return atEdge();

    // A reader who leaves before the answer is complete stops Kubo's side too; that is no error.
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    let upstream: IncomingMessage;
    try {
      upstream = await deps.kuboGateway.request(method === 'HEAD' ? 'HEAD' : 'GET', upstreamPath, req.headers, abort.signal);
    } catch {
      if (abort.signal.aborted) return;
      throw new Unavailable('kubo gateway');
    }
    // A whole answer that will not be kept: the edge serves this one and every next one.
    if (edge && upstream.statusCode === 200 && !answers.fits(upstream.headers)) {
      upstream.destroy();
      answers.markLarge(key!);
      return atEdge();
    }
    relay(upstream, res, ctx);
  }

  return (req, res) => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // Method, path and status only: the query carries gateway tokens.
      logger.info(
        { method: req.method, path: (req.url ?? '').split('?')[0], status: res.statusCode, ms: Math.round(ms * 10) / 10 },
        'gateway',
      );
    });
    handle(req, res).catch((err: unknown) => sendError(logger, req, res, err));
  };
}

interface RelayContext {
  namespace: GatewayNamespace;
  id: string;
  target: { cid: string; ttlS?: number };
  account: GatewayAccount;
  bandwidth: BandwidthMeter;
  answers: AnswerMemory;
  /** Where a small complete answer is kept, when it may be. */
  key: string | null;
  /** Behind the edge: the account the edge meters the answer against when it keeps it too. */
  keepAtEdge: string | null;
}

/** The headers as the reader gets them: an IPNS or folder path keeps its own path and lifetime. */
function readerHeaders(headers: Record<string, string | string[]>, ctx: RelayContext): Record<string, string | string[]> {
  if (ctx.namespace === 'ipfs') return headers;
  const asked = `/${ctx.namespace}/${encodeURIComponent(ctx.id)}`;
  const out = { ...headers };
  for (const name of ['x-ipfs-path', 'location']) {
    const value = out[name];
    if (typeof value === 'string') out[name] = value.replace(`/ipfs/${ctx.target.cid}`, asked);
  }
  out['cache-control'] = `public, max-age=${ctx.target.ttlS ?? 60}`;
  return out;
}

/** A kept answer, or 304 when the reader has it (its ETag is the content's). */
function sendKept(req: IncomingMessage, res: ServerResponse, kept: KeptAnswer, ctx: RelayContext): void {
  const headers = readerHeaders(kept.headers, ctx);
  const etag = kept.headers.etag;
  if (typeof etag === 'string' && req.headers['if-none-match']?.split(',').some((t) => t.trim() === etag)) {
    const { 'content-length': _length, 'content-type': _type, ...rest } = headers;
    res.writeHead(304, rest).end();
    return;
  }
  res.writeHead(200, ctx.keepAtEdge ? { ...headers, [EDGE_KEEP_HEADER]: ctx.keepAtEdge } : headers).end(kept.body);
  ctx.bandwidth.add(ctx.account.user._id, kept.body.length);
}

/** Passes Kubo's answer on: its status and content headers, the body streamed and counted. */
function relay(upstream: IncomingMessage, res: ServerResponse, ctx: RelayContext): void {
  const status = upstream.statusCode ?? 502;
  if (status >= 400) {
    upstream.resume();
    throw status === 404
      ? new HttpError(404, 'NOT_FOUND', 'no such path in this content')
      : status < 500
        ? new HttpError(status, 'BAD_REQUEST', 'the gateway cannot answer this request for this content')
        : new HttpError(502, 'UPSTREAM_FAILED', 'the content could not be read; retry later', { 'Retry-After': '5' });
  }
  const headers: Record<string, string | string[]> = {};
  for (const name of FORWARDED_RESPONSE) {
    const value = upstream.headers[name];
    if (value !== undefined) headers[name] = value;
  }
  const keep = ctx.key && status === 200 ? ctx.answers.collector(ctx.key, headers) : null;
  const marked = keep && ctx.keepAtEdge ? { [EDGE_KEEP_HEADER]: ctx.keepAtEdge } : {};
  res.writeHead(status, { ...readerHeaders(headers, ctx), ...marked });
  // What was handed to the response counts, also when the reader leaves midway (then up to
  // the response's buffer more than reached the reader).
  let sent = 0;
  upstream.on('data', (chunk: Buffer) => {
    sent += chunk.length;
    keep?.add(chunk);
  });
  upstream.once('end', () => keep?.done());
  res.once('close', () => ctx.bandwidth.add(ctx.account.user._id, sent));
  upstream.on('error', () => res.destroy());
  upstream.pipe(res);
}
