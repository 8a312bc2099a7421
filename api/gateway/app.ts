// The gateway: a surface of its own on GATEWAY_PORT. Each account's gateway is a subdomain,
// `<slug>.<domain>` (an origin per account, so one account's pages cannot script another's),
// serving `/ipfs/<cid>[/path]` and `/ipns/<name>[/path]` from the stack's Kubo gateway
// (infra/kubo-gateway.ts) once the account's rules admit the reader and the account holds the
// content. Bytes stream through; every byte sent counts against the account's bandwidth.
import type { IncomingMessage } from 'node:http';
import express, { type Express, type Request, type Response } from 'express';
import { HttpError, requestLog } from '../http.js';
import { FORWARDED_RESPONSE, type KuboGateway } from '../../infra/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import type { BandwidthMeter } from '../usecases/bandwidth.js';
import type { UseCaseDeps } from '../usecases/deps.js';
import { NotFound, Unavailable } from '../usecases/errors.js';
import type { HeldMemory } from '../usecases/held.js';
import {
  admitReader,
  gatewayCors,
  gatewayTarget,
  openAccountGateway,
  type GatewayAccount,
  type GatewayNamespace,
} from '../usecases/gateway.js';
import { gatewayErrorHandler } from './errors.js';

export interface GatewayDeps extends Pick<UseCaseDeps, 'db' | 'config'> {
  logger: Logger;
  kuboGateway: KuboGateway;
  bandwidth: BandwidthMeter;
  held: HeldMemory;
}

const SLUG = /^[a-z][a-z0-9]{0,62}$/;

/** The folder name of a `/folders/<name>[/path]` path, decoded. */
function folderNameOf(path: string): string | undefined {
  const encoded = /^\/folders\/([^/]+)/.exec(path)?.[1];
  if (encoded === undefined) return undefined;
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}

declare module 'express-serve-static-core' {
  interface Request {
    account?: GatewayAccount;
  }
}

/** The account a request's Host names: `<slug>.<domain>`. */
function slugOf(req: Request, domain: string): string | null {
  const host = req.hostname.toLowerCase();
  if (!host.endsWith(`.${domain}`)) return null;
  const slug = host.slice(0, -domain.length - 1);
  return SLUG.test(slug) ? slug : null;
}

function presentedToken(req: Request): string | undefined {
  const header = req.headers['x-gateway-token'];
  if (typeof header === 'string' && header) return header;
  return typeof req.query.token === 'string' ? req.query.token : undefined;
}

/** The query Kubo's gateway is given: `format`, `filename`, `download`; never the token. */
function kuboQuery(req: Request): string {
  const params = new URLSearchParams();
  for (const name of ['format', 'filename', 'download']) {
    const value = req.query[name];
    if (typeof value === 'string') params.set(name, value);
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

export function createGatewayApp(deps: GatewayDeps): Express {
  const { config, logger } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestLog(logger));

  // Whose gateway, and may this origin read it from a browser.
  app.use(async (req, res, next) => {
    const slug = slugOf(req, config.gateway.domain);
    if (!slug) throw new NotFound(`gateway for host ${req.hostname}; accounts' gateways are <slug>.${config.gateway.domain}`);
    req.account = await openAccountGateway(deps, slug);
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    const cors = await gatewayCors(deps, req.account, {
      origin: req.headers.origin,
      method: preflight ? String(req.headers['access-control-request-method']) : req.method,
      preflight,
      requestHeaders: req.headers['access-control-request-headers'],
      folderName: folderNameOf(req.path),
    });
    for (const [name, value] of Object.entries(cors))
      if (name === 'Vary') res.vary(value);
      else res.set(name, value);
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD')
      throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed; use GET or HEAD`, { Allow: 'GET, HEAD, OPTIONS' });
    next();
  });

  const serve = (namespace: GatewayNamespace) => async (req: Request, res: Response) => {
    const account = req.account!;
    await admitReader(deps, account, { ip: req.socket.remoteAddress ?? '', token: presentedToken(req) });
    await deps.bandwidth.assertLeft(account.user._id, account.plan);
    const id = String(req.params.id);
    const target = await gatewayTarget(deps, deps.held, account, namespace, id);
    // The path inside the content as the reader sent it (still percent-encoded), slashes kept.
    const rest = /^\/[a-z]+\/[^/]+(.*)$/.exec(req.path)?.[1] ?? '';
    // A reader who leaves before the answer is complete stops Kubo's side too; that is no error.
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const method = req.method === 'HEAD' ? 'HEAD' : 'GET';
    let upstream: IncomingMessage;
    try {
      upstream = await deps.kuboGateway.request(method, `/ipfs/${target.cid}${rest}${kuboQuery(req)}`, req.headers, abort.signal);
    } catch {
      if (abort.signal.aborted) return;
      throw new Unavailable('kubo gateway');
    }
    relay(upstream, res, { namespace, id, target, account, bandwidth: deps.bandwidth });
  };
  app.get('/ipfs/:id{/*rest}', serve('ipfs'));
  app.get('/ipns/:id{/*rest}', serve('ipns'));
  app.get('/folders/:id{/*rest}', serve('folders'));

  app.use((req) => {
    throw new NotFound(
      `path ${req.path}; this gateway serves /ipfs/<cid>[/path], /ipns/<name>[/path] and /folders/<top-level folder name>[/path]`,
    );
  });
  app.use(gatewayErrorHandler(logger));
  return app;
}

/** Passes Kubo's answer on: its status and content headers, the body streamed and counted. */
function relay(
  upstream: IncomingMessage,
  res: Response,
  ctx: {
    namespace: GatewayNamespace;
    id: string;
    target: { cid: string; ttlS?: number };
    account: GatewayAccount;
    bandwidth: BandwidthMeter;
  },
): void {
  const status = upstream.statusCode ?? 502;
  if (status >= 400) {
    upstream.resume();
    const error =
      status === 404
        ? new HttpError(404, 'NOT_FOUND', 'no such path in this content')
        : status < 500
          ? new HttpError(status, 'BAD_REQUEST', 'the gateway cannot answer this request for this content')
          : new HttpError(502, 'UPSTREAM_FAILED', 'the content could not be read; retry later', { 'Retry-After': '5' });
    throw error;
  }
  res.status(status);
  for (const name of FORWARDED_RESPONSE) {
    const value = upstream.headers[name];
    if (value !== undefined) res.setHeader(name, value);
  }
  if (ctx.namespace !== 'ipfs') {
    // The path the reader asked for, and the name's lifetime instead of immutable caching.
    const asked = `/${ctx.namespace}/${encodeURIComponent(ctx.id)}`;
    const rewrite = (v: string) => v.replace(`/ipfs/${ctx.target.cid}`, asked);
    for (const name of ['x-ipfs-path', 'location']) {
      const value = res.getHeader(name);
      if (typeof value === 'string') res.setHeader(name, rewrite(value));
    }
    res.setHeader('cache-control', `public, max-age=${ctx.target.ttlS ?? 60}`);
  }
  // What was handed to the response counts, also when the reader leaves midway (then up to
  // the response's buffer more than reached the reader).
  let sent = 0;
  upstream.on('data', (chunk: Buffer) => (sent += chunk.length));
  res.once('close', () => ctx.bandwidth.add(ctx.account.user._id, sent));
  upstream.on('error', () => res.destroy());
  upstream.pipe(res);
}
