// Who may read an account's gateway, as the account sets it: the settings (token required, IP
// allowlist, allowed origins) and the gateway tokens. The gateway enforces them
// (core/gateway.ts); these are the REST API's use-cases.
import ipaddr from 'ipaddr.js';
import { GATEWAY_TOKEN_PREFIX, GATEWAY_TOKEN_PREFIX_LENGTH, GATEWAY_TOKEN_RANDOM_LENGTH, GATEWAY_TOKENS_MAX } from '../infra/constants.js';
import { isDuplicateKey } from '../infra/db/errors.js';
import type { GatewayToken } from '../infra/db/gateway-tokens.js';
import { defaultGatewaySettings, type GatewaySettings } from '../infra/db/users.js';
import { digest, digestsEqual, randomBase62 } from '../infra/secrets.js';
import { forgottenEverywhere } from './access.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { InvalidInput, LimitReached, NotFound } from './errors.js';

type Deps = Pick<UseCaseDeps, 'db' | 'config' | 'edgeAnswers'>;

/** An address (`203.0.113.7`, `2001:db8::1`) or a CIDR range (`10.0.0.0/8`), normalised. */
export function normaliseIpEntry(entry: string): string {
  const text = entry.trim();
  try {
    if (text.includes('/')) {
      const [net, bits] = ipaddr.parseCIDR(text);
      return `${net.toString()}/${bits}`;
    }
    return ipaddr.parse(text).toString();
  } catch {
    throw new InvalidInput(`ipAllowlist: ${entry} is neither an IP address nor a CIDR range`, 'INVALID_IP');
  }
}

/** `*`, or an origin as browsers send it: `scheme://host[:port]`, no path. */
export function normaliseOrigin(origin: string): string {
  if (origin === '*') return origin;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new InvalidInput(`allowedOrigins: ${origin} is not an origin like https://app.example.com`, 'INVALID_ORIGIN');
  }
  if (!/^https?:$/.test(url.protocol) || url.origin !== origin.replace(/\/$/, '')) {
    throw new InvalidInput(`allowedOrigins: ${origin} is not an origin like https://app.example.com (no path)`, 'INVALID_ORIGIN');
  }
  return url.origin;
}

export async function updateGatewaySettings(deps: Deps, caller: Caller, changes: Partial<GatewaySettings>): Promise<GatewaySettings> {
  const current = caller.user.gateway ?? defaultGatewaySettings();
  const next: GatewaySettings = {
    tokenRequired: changes.tokenRequired ?? current.tokenRequired,
    ipAllowlist: changes.ipAllowlist ? [...new Set(changes.ipAllowlist.map(normaliseIpEntry))] : current.ipAllowlist,
    allowedOrigins: changes.allowedOrigins ? [...new Set(changes.allowedOrigins.map(normaliseOrigin))] : current.allowedOrigins,
  };
  await deps.db.users.setGatewaySettings(caller.user._id, next);
  await deps.edgeAnswers.forget(caller.user._id);
  return next;
}

/** A token as its owner sees it after creation: never the token or its digest. */
export const gatewayTokenInfo = (t: GatewayToken) => ({
  tokenPrefix: t._id,
  name: t.name,
  createdAt: t.createdAt,
  lastUsedAt: t.lastUsedAt,
  expiresAt: t.expiresAt,
});

const tokensKey = (userId: string) => `gateway-tokens:${userId}`;

export async function createGatewayToken(deps: Deps, caller: Caller, input: { name: string; expiresIn?: number }) {
  const userId = caller.user._id;
  if (!(await deps.db.counters.take(tokensKey(userId), GATEWAY_TOKENS_MAX))) {
    throw new LimitReached('GATEWAY_TOKEN_LIMIT', `an account has at most ${GATEWAY_TOKENS_MAX} gateway tokens; delete one first`);
  }
  try {
    // A prefix collision (about 1 in 2^47 per pair) is retried with a new token.
    for (let attempt = 0; ; attempt++) {
      const token = GATEWAY_TOKEN_PREFIX + randomBase62(GATEWAY_TOKEN_RANDOM_LENGTH);
      const createdAt = Date.now();
      const record: GatewayToken = {
        _id: token.slice(0, GATEWAY_TOKEN_PREFIX_LENGTH),
        userId,
        digest: digest(token),
        name: input.name,
        createdAt,
        expiresAt: input.expiresIn ? createdAt + input.expiresIn * 1000 : null,
        lastUsedAt: null,
      };
      try {
        await deps.db.gatewayTokens.insert(record);
      } catch (err) {
        if (isDuplicateKey(err) && attempt < 3) continue;
        throw err;
      }
      return { token, ...gatewayTokenInfo(record) };
    }
  } catch (err) {
    await deps.db.counters.give(tokensKey(userId));
    throw err;
  }
}

export async function listGatewayTokens(deps: Deps, caller: Caller) {
  return (await deps.db.gatewayTokens.listForUser(caller.user._id)).map(gatewayTokenInfo);
}

/**
 * By the 12-character prefix or the full token; another account's is 404.
 *
 * Every API process remembers a token it found for AUTH_MEMORY_MS (infra/db/gateway-tokens.ts):
 * the answer waits that long after the token is gone, and then has every edge forget the
 * account's kept answers (which no process can make again with the token by then). Once answered,
 * the token opens nothing. A 404 for a well-formed token does the same: it may answer the retry
 * of a deletion whose answer was lost.
 */
export async function deleteGatewayToken(deps: Deps, caller: Caller, tokenOrPrefix: string): Promise<{ tokenPrefix: string }> {
  const prefix = tokenOrPrefix.slice(0, GATEWAY_TOKEN_PREFIX_LENGTH);
  const isFull = tokenOrPrefix.length === GATEWAY_TOKEN_PREFIX.length + GATEWAY_TOKEN_RANDOM_LENGTH;
  if (!tokenOrPrefix.startsWith(GATEWAY_TOKEN_PREFIX) || (!isFull && tokenOrPrefix.length !== GATEWAY_TOKEN_PREFIX_LENGTH)) {
    throw new NotFound('gateway token');
  }
  const letGo = async () => {
    await forgottenEverywhere();
    await deps.edgeAnswers.forget(caller.user._id);
  };
  try {
    const token = await deps.db.gatewayTokens.get(prefix);
    if (!token || token.userId !== caller.user._id || (isFull && !digestsEqual(token.digest, digest(tokenOrPrefix)))) {
      throw new NotFound('gateway token');
    }
    if (!(await deps.db.gatewayTokens.delete(caller.user._id, prefix))) throw new NotFound('gateway token');
    await deps.db.counters.give(tokensKey(caller.user._id));
  } catch (err) {
    if (err instanceof NotFound) await letGo();
    throw err;
  }
  await letGo();
  return { tokenPrefix: prefix };
}
