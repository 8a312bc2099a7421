// Authentication: `X-Api-Key: <key>` or `Authorization: Bearer <key>` (decisions.md). The key
// is found by its prefix (its first 12 characters) and its SHA-256 digest compared in constant
// time; an unknown, expired or deleted key is 401. Keys and users are read again at most
// every AUTH_MEMORY_MS (1 s): deleting a key or changing a plan counts at once in the process
// that made the change, and within that second in the others.
import type { Request, RequestHandler } from 'express';
import type { Database } from '../../infra/db/index.js';
import type { ApiKey } from '../../infra/db/api-keys.js';
import type { User } from '../../infra/db/users.js';
import type { Plan, Plans } from '../../infra/plans.js';
import { API_KEY_PREFIX_LENGTH } from '../../infra/constants.js';
import { digest, digestsEqual, looksLikeApiKey } from '../../infra/secrets.js';
import { Internal, Unauthorized } from '../errors.js';

export interface AuthContext {
  user: User;
  key: ApiKey;
  plan: Plan;
}

declare module 'express-serve-static-core' {
  interface Request {
    auth?: AuthContext;
  }
}

/** The caller, for handlers behind `authenticate`. */
export function caller(req: Request): AuthContext {
  if (!req.auth) throw new Internal();
  return req.auth;
}

function presentedKey(req: Request): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const authz = req.headers.authorization;
  const match = authz ? /^Bearer\s+(\S+)\s*$/i.exec(authz) : null;
  return match?.[1];
}

export function authenticate(db: Database, plans: Plans): RequestHandler {
  return async (req, _res, next) => {
    const presented = presentedKey(req);
    if (!presented) throw new Unauthorized();
    if (!looksLikeApiKey(presented)) throw new Unauthorized('the API key is malformed');
    const hex = digest(presented);
    const key = await db.apiKeys.get(presented.slice(0, API_KEY_PREFIX_LENGTH));
    if (!key || !digestsEqual(key.digest, hex)) throw new Unauthorized('the API key is unknown or was deleted');
    const now = Date.now();
    if (key.expiresAt !== undefined && key.expiresAt !== null && key.expiresAt <= now) throw new Unauthorized('the API key has expired');
    const user = await db.users.get(key.userId);
    if (!user) throw new Unauthorized('the API key is unknown or was deleted');
    db.apiKeys.recordUse(key._id, now);
    req.auth = { user, key, plan: plans.get(user.plan) };
    next();
  };
}
