// The gateway's use-cases: whose gateway a request reached, whether this reader may read from
// it (IP allowlist, gateway token), which origins may read it from a browser, what a path
// names (a CID the account holds, or one of the service's IPNS names pointing at such a CID),
// and the bandwidth it is sending against the account's plan. The surface (api/gateway/)
// passes the bytes; none of this knows HTTP.
import ipaddr from 'ipaddr.js';
import type { Config } from '../infra/config.js';
import { CidError, parseCid } from '../infra/ipfs/cid.js';
import { GATEWAY_TOKEN_PREFIX, FOLDER_PATH_TTL_S, GATEWAY_TOKEN_PREFIX_LENGTH, IPNS_RECORD_TTL_MS } from '../infra/constants.js';
import { defaultGatewaySettings, type GatewaySettings, type User } from '../infra/db/users.js';
import type { FolderRecord } from '../infra/db/folders.js';
import type { Plan } from '../infra/plans.js';
import { digest, digestsEqual } from '../infra/secrets.js';
import type { UseCaseDeps } from './deps.js';
import { corsResponseHeaders, matchCorsRule, requestedHeaders } from './cors.js';
import type { HeldMemory } from './held.js';
import { Forbidden, Gone, InvalidInput, NotFound, Unauthenticated } from './errors.js';

type Deps = Pick<UseCaseDeps, 'db' | 'config'>;

export interface GatewayAccount {
  user: User;
  plan: Plan;
  slug: string;
  settings: GatewaySettings;
}

/** The address of an account's gateway: its slug as a subdomain of the gateway's public address. */
export function accountGatewayUrl(config: Config, slug: string): string {
  const base = new URL(config.gateway.publicUrl ?? `http://${config.gateway.domain}:${config.gateway.port}`);
  base.hostname = `${slug}.${base.hostname}`;
  return base.origin;
}

/**
 * Where links to an account's content point (`uris.gateway` of uploads, /image's redirect to
 * an original): GATEWAY_URL when set (a public gateway), else the account's own gateway.
 */
export async function contentLinkBase(deps: Deps, account: User | string): Promise<string> {
  if (deps.config.gatewayUrl) return deps.config.gatewayUrl;
  const user = typeof account === 'string' ? await deps.db.users.get(account) : account;
  if (!user) throw new NotFound('account');
  return accountGatewayUrl(deps.config, await deps.db.users.gatewaySlugOf(user));
}

/** The account whose gateway `slug` is; 404 for a slug nobody has. */
export async function openAccountGateway(deps: Deps, slug: string): Promise<GatewayAccount> {
  const owner = await deps.db.users.slugs.owner(slug);
  const user = owner ? await deps.db.users.get(owner) : null;
  // A claim whose user never got it (gateway-slugs.ts) is not a gateway.
  if (!user || user.gatewaySlug !== slug) throw new NotFound('gateway');
  return { user, plan: deps.config.plans.get(user.plan), slug, settings: user.gateway ?? defaultGatewaySettings() };
}

/** Whether `ip` is one of the allowlist's addresses or in one of its CIDR ranges (IPv4-mapped IPv6 counts as IPv4). */
export function ipAllowed(allowlist: string[], ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  let addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  return allowlist.some((entry) => {
    const [net, bits] = entry.includes('/') ? ipaddr.parseCIDR(entry) : [ipaddr.parse(entry), null];
    if (net.kind() !== addr.kind()) return false;
    return bits === null ? net.toString() === addr.toString() : addr.match([net, bits] as never);
  });
}

/**
 * Admits a reader: outside a non-empty IP allowlist is 403; without a valid token of the
 * account, when it requires one, 401. A token is found by its prefix and its digest compared
 * in constant time; an expired or another account's token is as good as none.
 */
export async function admitReader(deps: Deps, account: GatewayAccount, reader: { ip: string; token?: string }): Promise<void> {
  const { settings } = account;
  if (settings.ipAllowlist.length > 0 && !ipAllowed(settings.ipAllowlist, reader.ip)) {
    throw new Forbidden('IP_NOT_ALLOWED', `this gateway does not serve ${reader.ip}`);
  }
  if (!settings.tokenRequired) return;
  const presented = reader.token;
  if (!presented) throw new Unauthenticated('this gateway needs a gateway token: ?token= or X-Gateway-Token');
  const token = presented.startsWith(GATEWAY_TOKEN_PREFIX)
    ? await deps.db.gatewayTokens.get(presented.slice(0, GATEWAY_TOKEN_PREFIX_LENGTH))
    : null;
  const now = Date.now();
  if (
    !token ||
    token.userId !== account.user._id ||
    !digestsEqual(token.digest, digest(presented)) ||
    (token.expiresAt !== null && token.expiresAt <= now)
  ) {
    throw new Unauthenticated('the gateway token is unknown, expired or deleted');
  }
  deps.db.gatewayTokens.recordUse(token._id, now);
}

const CORS_ALLOW_HEADERS = 'Range, If-None-Match, If-Modified-Since, X-Gateway-Token';
const CORS_EXPOSE_HEADERS = 'Content-Range, Content-Length, Accept-Ranges, ETag, X-Ipfs-Path, X-Ipfs-Roots';

/** A browser's request as CORS sees it: a preflight names the method and headers to come. */
export interface GatewayCorsRequest {
  origin?: string;
  method: string;
  preflight: boolean;
  requestHeaders?: string;
  /** On a `/folders/<name>` path: that folder (`findGatewayFolder`), or null when there is none. */
  folder?: FolderRecord | null;
}

/** The account's top-level folder a `/folders/<name>` path names: looked up once per request, for CORS and content. */
export const findGatewayFolder = (deps: Deps, account: GatewayAccount, name: string): Promise<FolderRecord | null> =>
  deps.db.folders.topLevelByName(account.user._id, name);

/**
 * The CORS headers of an answer (none: the browser keeps it from the page). Under
 * `/folders/<name>` a folder with a CORS document (S3's model, PUT /folders/:id/cors) decides by
 * its rules; elsewhere the account's allowedOrigins do: every origin (`*`) while it lists none,
 * a listed origin itself, nothing otherwise.
 */
export async function gatewayCors(deps: Deps, account: GatewayAccount, request: GatewayCorsRequest): Promise<Record<string, string>> {
  const { origin } = request;
  if (origin === undefined) return {};
  if (request.folder !== undefined) {
    const doc = request.folder ? await deps.db.cors.get(request.folder._id) : null;
    if (doc) {
      const corsRequest = { origin, method: request.method, requestHeaders: requestedHeaders(request.requestHeaders) };
      const rule = matchCorsRule(doc, corsRequest);
      return rule ? corsResponseHeaders(rule, corsRequest) : {};
    }
  }
  const { allowedOrigins } = account.settings;
  const allowed = allowedOrigins.length === 0 ? '*' : allowedOrigins.includes(origin) || allowedOrigins.includes('*') ? origin : null;
  if (!allowed) return {};
  const headers: Record<string, string> = { 'Access-Control-Allow-Origin': allowed, 'Access-Control-Expose-Headers': CORS_EXPOSE_HEADERS };
  if (allowed !== '*') headers.Vary = 'Origin';
  if (request.preflight) {
    Object.assign(headers, {
      'Access-Control-Allow-Methods': 'GET, HEAD',
      'Access-Control-Allow-Headers': CORS_ALLOW_HEADERS,
      'Access-Control-Max-Age': '600',
    });
  }
  return headers;
}

export interface GatewayTarget {
  /** The content's root, CIDv1, as Kubo's gateway is asked for it. */
  cid: string;
  /** For an IPNS path: seconds a reader may cache the answer (the record's TTL). */
  ttlS?: number;
}

const notHeld = () =>
  new Gone('NOT_HELD', "this gateway serves only content its account holds (files, pins, snapshots, IPNS names' targets)");

/** How a gateway path names content: by CID, by IPNS name, or by a top-level folder's name (its latest snapshot). */
export type GatewayNamespace = 'ipfs' | 'ipns' | 'folders';

/** What `/<namespace>/<id>` names on the account's gateway: content it holds, or 410 (404 for names it does not have). */
export async function gatewayTarget(
  deps: Deps,
  held: HeldMemory,
  account: GatewayAccount,
  namespace: GatewayNamespace,
  id: string,
  /** A `/folders` path's folder when the caller looked it up already. */
  found?: FolderRecord | null,
): Promise<GatewayTarget> {
  if (namespace === 'ipfs') {
    let cid;
    try {
      cid = parseCid(id);
    } catch (err) {
      throw new InvalidInput((err as CidError).message, 'INVALID_CID');
    }
    if (!(await held.byUser(account.user._id, cid.multihash))) throw notHeld();
    return { cid: cid.v1 };
  }
  if (namespace === 'folders') {
    // The folder as last snapshotted: a snapshot holds its directory while it exists.
    const folder = found === undefined ? await findGatewayFolder(deps, account, id) : found;
    const [latest] = folder ? await deps.db.snapshots.list(folder._id, { limit: 1 }) : [];
    if (!latest) throw new NotFound(`snapshot of a top-level folder named ${id}`);
    return { cid: latest.cid, ttlS: FOLDER_PATH_TTL_S };
  }
  // Names of this service only: resolving others would make the gateway a proxy to the network.
  const name = await deps.db.ipnsNames.get(id);
  if (!name?.cid || !name.multihash) throw new NotFound(`IPNS name ${id} on this service`);
  if (!(await held.byUser(account.user._id, name.multihash))) throw notHeld();
  return { cid: name.cid, ttlS: IPNS_RECORD_TTL_MS / 1000 };
}
