// Who is asking, and whether they may ask again: API key authentication and the per-key
// request rate, for every surface that takes API keys (REST, later the PSA).
//
// A key is found by its prefix (its first 12 characters) and its SHA-256 digest compared in
// constant time; an unknown, expired or deleted key is refused. A key found is remembered for
// AUTH_MEMORY_MS (1 s; reads of keys not remembered share one query: infra/db/batch.ts), and
// its deletion answers only after that time (apikeys.ts), so a key deleted through any API
// process is refused by all of them once the deletion is answered; expiry is compared with the
// clock on every request. Users are read again at most every AUTH_MEMORY_MS too: a plan change
// counts at once in the process that made it, and within that second in the others.
import { API_KEY_PREFIX_LENGTH, AUTH_MEMORY_MS, RATE_WINDOW_MS } from '../infra/constants.js';
import { digest, digestsEqual, looksLikeApiKey } from '../infra/secrets.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { Unauthenticated } from './errors.js';

/**
 * Resolves once no API process can still accept a credential deleted before the call: each
 * remembers what it found for AUTH_MEMORY_MS, counted from before its read (infra/db/by-id.ts).
 * A deletion of an API key or gateway token answers after this, so once answered it holds
 * everywhere.
 */
export function forgottenEverywhere(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, AUTH_MEMORY_MS));
}

export async function authenticate(deps: Pick<UseCaseDeps, 'db' | 'config'>, presented: string | undefined): Promise<Caller> {
  if (!presented) throw new Unauthenticated();
  if (!looksLikeApiKey(presented)) throw new Unauthenticated('the API key is malformed');
  const key = await deps.db.apiKeys.get(presented.slice(0, API_KEY_PREFIX_LENGTH));
  if (!key || !digestsEqual(key.digest, digest(presented))) throw new Unauthenticated('the API key is unknown or was deleted');
  const now = Date.now();
  if (key.expiresAt !== undefined && key.expiresAt !== null && key.expiresAt <= now) throw new Unauthenticated('the API key has expired');
  const user = await deps.db.users.get(key.userId);
  if (!user) throw new Unauthenticated('the API key is unknown or was deleted');
  deps.db.apiKeys.recordUse(key._id, now);
  return { user, key, plan: deps.config.plans.get(user.plan) };
}

export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the window ends. */
  resetS: number;
  exceeded: boolean;
}

/**
 * Counts one request of the caller's key against the plan's `requestsPerMinute`, in fixed
 * one-minute windows shared by every API process (infra/db/rate-limits.ts).
 */
export async function countRequest(deps: Pick<UseCaseDeps, 'db'>, caller: Caller): Promise<RateState> {
  const now = Date.now();
  const windowStart = now - (now % RATE_WINDOW_MS);
  const count = await deps.db.rateLimits.hit(caller.key?._id ?? caller.user._id, windowStart, RATE_WINDOW_MS);
  const limit = caller.plan.requestsPerMinute;
  return {
    limit,
    remaining: Math.max(0, limit - count),
    resetS: Math.max(1, Math.ceil((windowStart + RATE_WINDOW_MS - now) / 1000)),
    exceeded: count > limit,
  };
}
