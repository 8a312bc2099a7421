// Signed upload tokens (docs/api/contract.md, "Signed upload tokens"): a user hands a browser or a third party a token that may
// only upload, into one folder, within a size, of some types, a number of times, until it
// expires. The token authenticates as its owner: the upload is the owner's and counts against
// the owner's quota. Its rules are checked where they can be: the size while the bytes stream
// (uploads.ts cuts the stream), the type against the declared type and the first bytes.
import { fileTypeFromBuffer, supportedMimeTypes } from 'file-type';
import { isDuplicateKey } from '../infra/db/errors.js';
import type { SignedTokenRecord } from '../infra/db/signed-tokens.js';
import { UNLIMITED_USES } from '../infra/db/signed-tokens.js';
import {
  SIGNED_TOKEN_DEFAULT_EXPIRES_IN_S,
  SIGNED_TOKEN_ID_PREFIX,
  SIGNED_TOKEN_PREFIX,
  SIGNED_TOKEN_PREFIX_LENGTH,
  SIGNED_TOKEN_RANDOM_LENGTH,
} from '../infra/constants.js';
import { digest, digestsEqual, randomBase62 } from '../infra/secrets.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { Forbidden, InvalidInput, LimitReached, NotFound, Unauthenticated, UnsupportedContent } from './errors.js';
import { decodeCursor, toPage } from './pages.js';

type Deps = Pick<UseCaseDeps, 'db' | 'config'>;

export interface SignedTokenInput {
  name?: string;
  /** Seconds (the surface checks the range). */
  expiresIn?: number;
  maxFileSize?: number;
  allowedMimeTypes?: string[];
  folderId?: string;
  maxUses?: number;
}

/** A token as its owner sees it in lists: never the token or its digest. */
export interface SignedTokenInfo {
  tokenId: string;
  tokenPrefix: string;
  tokenName: string;
  folderId: string | null;
  maxFileSize: number | null;
  allowedMimeTypes: string[] | null;
  maxUses: number | null;
  useCount: number;
  expiresAt: number;
  lastUsedAt: number | null;
  createdAt: number;
  revoked: boolean;
}

export const tokenInfo = (t: SignedTokenRecord): SignedTokenInfo => ({
  tokenId: t._id,
  tokenPrefix: t.prefix,
  tokenName: t.name,
  folderId: t.folderId,
  maxFileSize: t.maxFileSize,
  allowedMimeTypes: t.allowedMimeTypes,
  maxUses: t.maxUses,
  useCount: t.useCount,
  expiresAt: t.expiresAt,
  lastUsedAt: t.lastUsedAt,
  createdAt: t.createdAt,
  revoked: t.revoked,
});

/** The plan's `signedTokens` counts the tokens that can still be used: neither revoked nor expired. */
const liveTokensKey = (userId: string) => `signed-tokens:${userId}`;

async function takeTokenSlot(deps: Deps, caller: Caller): Promise<void> {
  const { user, plan } = caller;
  const key = liveTokensKey(user._id);
  if (await deps.db.counters.take(key, plan.signedTokens)) return;
  // At the limit: expired tokens stop counting now, each released by one caller only.
  const released = await deps.db.signedTokens.releaseExpired(user._id, Date.now());
  for (let i = 0; i < released; i++) await deps.db.counters.give(key);
  if (released > 0 && (await deps.db.counters.take(key, plan.signedTokens))) return;
  throw new LimitReached(
    'SIGNED_TOKEN_LIMIT',
    `your plan allows ${plan.signedTokens} signed upload tokens at a time; revoke one or wait for one to expire`,
  );
}

export async function createSignedToken(deps: Deps, caller: Caller, input: SignedTokenInput) {
  const { user } = caller;
  if (input.folderId && !(await deps.db.folders.findForUser(user._id, input.folderId))) {
    throw new InvalidInput(`folder ${input.folderId} not found`, 'FOLDER_NOT_FOUND');
  }
  await takeTokenSlot(deps, caller);
  try {
    // A prefix collision (about 1 in 2^47 per pair of tokens) is retried with a new token.
    for (let attempt = 0; ; attempt++) {
      const token = SIGNED_TOKEN_PREFIX + randomBase62(SIGNED_TOKEN_RANDOM_LENGTH);
      const createdAt = Date.now();
      const record: SignedTokenRecord = {
        _id: SIGNED_TOKEN_ID_PREFIX + randomBase62(16),
        userId: user._id,
        prefix: token.slice(0, SIGNED_TOKEN_PREFIX_LENGTH),
        digest: digest(token),
        name: input.name ?? 'Upload token',
        folderId: input.folderId ?? null,
        maxFileSize: input.maxFileSize ?? null,
        allowedMimeTypes: input.allowedMimeTypes?.map((t) => t.toLowerCase()) ?? null,
        maxUses: input.maxUses ?? null,
        usesLeft: input.maxUses ?? UNLIMITED_USES,
        useCount: 0,
        createdAt,
        expiresAt: createdAt + (input.expiresIn ?? SIGNED_TOKEN_DEFAULT_EXPIRES_IN_S) * 1000,
        lastUsedAt: null,
        revoked: false,
        released: false,
      };
      try {
        await deps.db.signedTokens.insert(record);
      } catch (err) {
        if (isDuplicateKey(err) && attempt < 3) continue;
        throw err;
      }
      return {
        token,
        tokenId: record._id,
        tokenPrefix: record.prefix,
        tokenName: record.name,
        expiresAt: record.expiresAt,
        uploadUrl: `${deps.config.api.publicUrl ?? ''}/upload/new`,
      };
    }
  } catch (err) {
    await deps.db.counters.give(liveTokensKey(user._id));
    throw err;
  }
}

export async function listSignedTokens(deps: Deps, caller: Caller, q: { limit: number; cursor?: string }) {
  const last = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.signedTokens.page(caller.user._id, q.limit + 1, last);
  const page = toPage(rows, q.limit, (t) => ({ at: t.createdAt, id: t._id }));
  return { items: page.items.map(tokenInfo), nextCursor: page.nextCursor };
}

/** Revokes at once: the next upload with it is 401, in every process. Another user's is 404. */
export async function revokeSignedToken(deps: Deps, caller: Caller, tokenId: string): Promise<{ tokenId: string }> {
  const { found, released } = await deps.db.signedTokens.revoke(caller.user._id, tokenId);
  if (!found) throw new NotFound('signed token');
  if (released) await deps.db.counters.give(liveTokensKey(caller.user._id));
  return { tokenId };
}

/** What an upload with a token may do; the upload use-case enforces it. */
export interface UploadGrant {
  tokenId: string;
  folderId: string | null;
  maxFileSize: number | null;
  allowedMimeTypes: string[] | null;
  /** Gives the use back when the upload fails (once; later calls do nothing). */
  release(): Promise<void>;
}

const looksLikeToken = (value: string) =>
  value.length === SIGNED_TOKEN_PREFIX.length + SIGNED_TOKEN_RANDOM_LENGTH &&
  value.startsWith(SIGNED_TOKEN_PREFIX) &&
  /^[0-9A-Za-z]+$/.test(value.slice(SIGNED_TOKEN_PREFIX.length));

/** The token a request presents, and its owner; the surface counts the request's rate next. */
export interface SignedCaller {
  caller: Caller;
  token: SignedTokenRecord;
}

/** Authenticates by token. Unknown or revoked: 401. Expired: 403 (real, but allows no more). */
export async function authenticateSigned(deps: Deps, presented: string): Promise<SignedCaller> {
  if (!looksLikeToken(presented)) throw new Unauthenticated('the signed upload token is malformed');
  const token = await deps.db.signedTokens.byPrefix(presented.slice(0, SIGNED_TOKEN_PREFIX_LENGTH));
  if (!token || !digestsEqual(token.digest, digest(presented))) throw new Unauthenticated('the signed upload token is unknown');
  if (token.revoked) throw new Unauthenticated('the signed upload token was revoked');
  const user = await deps.db.users.get(token.userId);
  if (!user) throw new Unauthenticated('the signed upload token is unknown');
  if (token.expiresAt <= Date.now()) throw new Forbidden('TOKEN_EXPIRED', 'the signed upload token has expired');
  return { caller: { user, plan: deps.config.plans.get(user.plan) }, token };
}

/** Takes one use of the token (atomically: two concurrent last uses cannot both pass): 403 when used up. */
export async function takeTokenUse(deps: Deps, { token }: SignedCaller): Promise<UploadGrant> {
  const now = Date.now();
  if (!(await deps.db.signedTokens.take(token._id, now))) {
    // Revoked, expired or used up since it was read: say which it is now.
    const current = await deps.db.signedTokens.byPrefix(token.prefix);
    if (!current || current.revoked) throw new Unauthenticated('the signed upload token was revoked');
    if (current.expiresAt <= now) throw new Forbidden('TOKEN_EXPIRED', 'the signed upload token has expired');
    throw new Forbidden('TOKEN_USED_UP', `the signed upload token was used its ${token.maxUses} times`);
  }
  let released = false;
  return {
    tokenId: token._id,
    folderId: token.folderId,
    maxFileSize: token.maxFileSize,
    allowedMimeTypes: token.allowedMimeTypes,
    async release() {
      if (released) return;
      released = true;
      await deps.db.signedTokens.giveBack(token._id);
    },
  };
}

/** `image/*`, `*\/*` or an exact type, case-insensitive; parameters (`; charset=…`) are ignored. */
export function mimeAllowed(patterns: string[], mimeType: string): boolean {
  const type = mimeType.split(';')[0]!.trim().toLowerCase();
  return patterns.some((p) => p === '*/*' || p === type || (p.endsWith('/*') && type.startsWith(p.slice(0, -1))));
}

/** Types written as text, which no signature identifies (file-type recognises binary formats). */
const isTextual = (type: string) => type.startsWith('text/') || /[/+](xml|json)$/.test(type) || type === 'image/svg+xml';

/**
 * The type rule of a grant: the declared type must be allowed, and so must the type the first
 * bytes show. Bytes with no recognisable signature pass only as a textual type: a real PNG,
 * say, always starts with PNG's signature, so "image/png" over unrecognisable bytes is a spoof.
 */
export async function checkContentType(allowed: string[], declared: string, head: Uint8Array): Promise<void> {
  const type = declared.split(';')[0]!.trim().toLowerCase();
  if (!mimeAllowed(allowed, type)) {
    throw new UnsupportedContent('MIME_TYPE_NOT_ALLOWED', `this token accepts ${allowed.join(', ')}; the file is declared ${type}`);
  }
  const sniffed = (await fileTypeFromBuffer(head))?.mime;
  if (sniffed && !mimeAllowed(allowed, sniffed)) {
    throw new UnsupportedContent('MIME_TYPE_NOT_ALLOWED', `this token accepts ${allowed.join(', ')}; the file's bytes are ${sniffed}`);
  }
  if (!sniffed && supportedMimeTypes.has(type as never) && !isTextual(type)) {
    throw new UnsupportedContent('MIME_TYPE_MISMATCH', `the file is declared ${type} but its bytes are not ${type}`);
  }
}

/** The folder an upload with this grant goes to: the token's; asking for another is 403. */
export function grantFolder(grant: UploadGrant, requested: string | null | undefined): string | null {
  if (requested !== undefined && requested !== grant.folderId) {
    throw new Forbidden(
      'FOLDER_NOT_ALLOWED',
      grant.folderId ? `this token uploads into folder ${grant.folderId} only` : 'this token uploads outside folders only',
    );
  }
  return grant.folderId;
}
