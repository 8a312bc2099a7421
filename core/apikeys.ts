// API key use-cases, shared by the REST routes and the admin CLI.
import type { ApiKey } from '../infra/db/api-keys.js';
import { isDuplicateKey } from '../infra/db/errors.js';
import { API_KEY_MAX_EXPIRES_IN_S, API_KEY_MIN_EXPIRES_IN_S, API_KEY_PREFIX, API_KEY_PREFIX_LENGTH } from '../infra/constants.js';
import { digest, digestsEqual, looksLikeApiKey, newApiKey, seal } from '../infra/secrets.js';
import { forgottenEverywhere } from './access.js';
import type { UseCaseDeps } from './deps.js';
import { Conflict, InvalidInput, LimitReached, NotFound } from './errors.js';

export type ApiKeyDeps = Pick<UseCaseDeps, 'db' | 'config'>;

/** A key as its owner sees it: never its secret or digest. */
export interface ApiKeyInfo {
  keyPrefix: string;
  keyName: string;
  createdAt: number;
  expiresAt?: number;
  lastUsedAt: number | null;
}

export function keyInfo(key: ApiKey): ApiKeyInfo {
  return {
    keyPrefix: key._id,
    keyName: key.keyName,
    createdAt: key.createdAt,
    ...(key.expiresAt ? { expiresAt: key.expiresAt } : {}),
    lastUsedAt: key.lastUsedAt ?? null,
  };
}

/** The user's key decisions (plan limit, last-key rule) are made one at a time. */
const keyLock = (userId: string) => `apikeys:${userId}`;

export async function createApiKey(
  deps: ApiKeyDeps,
  input: { userId: string; maxKeys: number; name?: string; expiresIn?: number },
): Promise<{ apiKey: string; keyPrefix: string; keyName: string; createdAt: number; expiresAt?: number }> {
  const { expiresIn } = input;
  if (
    expiresIn !== undefined &&
    !(Number.isInteger(expiresIn) && expiresIn >= API_KEY_MIN_EXPIRES_IN_S && expiresIn <= API_KEY_MAX_EXPIRES_IN_S)
  ) {
    throw new InvalidInput(`expiresIn takes whole seconds from ${API_KEY_MIN_EXPIRES_IN_S} to ${API_KEY_MAX_EXPIRES_IN_S} (10 years)`);
  }
  return deps.db.locks.withLock(keyLock(input.userId), async () => {
    if ((await deps.db.apiKeys.countForUser(input.userId)) >= input.maxKeys) {
      throw new LimitReached('API_KEY_LIMIT', `your plan allows ${input.maxKeys} API keys; delete one first`);
    }
    // A prefix collision (about 1 in 2^47 per pair of keys) is retried with a new key.
    for (let attempt = 0; ; attempt++) {
      const { apiKey, keyPrefix } = newApiKey();
      const createdAt = Date.now();
      const expiresAt = input.expiresIn ? createdAt + input.expiresIn * 1000 : undefined;
      const record: ApiKey = {
        _id: keyPrefix,
        userId: input.userId,
        digest: digest(apiKey),
        sealedSecret: seal(deps.config.masterKey, apiKey),
        keyName: input.name ?? 'Default',
        createdAt,
        ...(expiresAt ? { expiresAt } : {}),
      };
      try {
        await deps.db.apiKeys.insert(record);
      } catch (err) {
        if (isDuplicateKey(err) && attempt < 3) continue;
        throw err;
      }
      return { apiKey, keyPrefix, keyName: record.keyName, createdAt, ...(expiresAt ? { expiresAt } : {}) };
    }
  });
}

export async function listApiKeys(deps: ApiKeyDeps, userId: string): Promise<ApiKeyInfo[]> {
  return (await deps.db.apiKeys.listForUser(userId)).map(keyInfo);
}

/**
 * `keyOrPrefix` is the full key or its 12-character prefix. Another user's key is 404.
 *
 * Every API process remembers a key it found for AUTH_MEMORY_MS (infra/db/api-keys.ts), so the
 * answer waits that long after the key is gone: once a deletion is answered, no process accepts
 * the key. A 404 for a well-formed key waits too: it may answer the retry of a deletion whose answer
 * was lost.
 */
export async function deleteApiKey(deps: ApiKeyDeps, userId: string, keyOrPrefix: string): Promise<{ keyPrefix: string }> {
  const isFullKey = looksLikeApiKey(keyOrPrefix);
  const isPrefix = keyOrPrefix.length === API_KEY_PREFIX_LENGTH && keyOrPrefix.startsWith(API_KEY_PREFIX);
  if (!isFullKey && !isPrefix) throw new NotFound('API key');
  try {
    const deleted = await deleteKey(deps, userId, keyOrPrefix, isFullKey);
    await forgottenEverywhere();
    return deleted;
  } catch (err) {
    if (err instanceof NotFound) await forgottenEverywhere();
    throw err;
  }
}

async function deleteKey(deps: ApiKeyDeps, userId: string, keyOrPrefix: string, isFullKey: boolean): Promise<{ keyPrefix: string }> {
  const key = await deps.db.apiKeys.findByPrefix(userId, keyOrPrefix.slice(0, API_KEY_PREFIX_LENGTH));
  if (!key || (isFullKey && !digestsEqual(key.digest, digest(keyOrPrefix)))) throw new NotFound('API key');

  // Nobody locks themselves out: another key that still works must remain. Under the
  // user's lock, two concurrent deletes of the last two keys cannot both pass this check.
  await deps.db.locks.withLock(keyLock(userId), async () => {
    if ((await deps.db.apiKeys.countUsableOthers(userId, key._id, Date.now())) === 0) {
      throw new Conflict('LAST_API_KEY', 'this is your last usable API key; create another one before deleting it');
    }
    if (!(await deps.db.apiKeys.delete(userId, key._id))) throw new NotFound('API key');
  });
  return { keyPrefix: key._id };
}
