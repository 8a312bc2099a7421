// Signed upload tokens: one document per token. A token is found by its prefix (unique index)
// and its SHA-256 digest compared by the caller, like an API key; unlike an API key it is never
// remembered between requests, so a revocation counts at once in every process.
//
// Uses are counted down in `usesLeft` by one conditional update (`usesLeft > 0`, not revoked,
// not expired), so two concurrent last uses cannot both pass; a use whose upload then fails is
// given back. A token without `maxUses` starts with UNLIMITED_USES.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { after } from './pages.js';

export interface SignedTokenRecord {
  /** The public token ID, `sut_…`. */
  _id: string;
  userId: string;
  /** The token's first 12 characters: how a presented token is found. */
  prefix: string;
  /** SHA-256 of the full token, hex. */
  digest: string;
  name: string;
  folderId: string | null;
  maxFileSize: number | null;
  allowedMimeTypes: string[] | null;
  maxUses: number | null;
  usesLeft: number;
  useCount: number;
  createdAt: number;
  expiresAt: number;
  lastUsedAt: number | null;
  revoked: boolean;
  /** Set once the token no longer counts against the plan's signedTokens (revoked or expired and reclaimed). */
  released: boolean;
}

/** `usesLeft` of a token without maxUses: more than any token can be used. */
export const UNLIMITED_USES = Number.MAX_SAFE_INTEGER;

const schema = new Schema<SignedTokenRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    prefix: { type: String, required: true },
    digest: { type: String, required: true },
    name: { type: String, required: true },
    folderId: { type: String, default: null },
    maxFileSize: { type: Number, default: null },
    allowedMimeTypes: { type: [String], default: null },
    maxUses: { type: Number, default: null },
    usesLeft: { type: Number, required: true },
    useCount: { type: Number, required: true },
    createdAt: { type: Number, required: true },
    expiresAt: { type: Number, required: true },
    lastUsedAt: { type: Number, default: null },
    revoked: { type: Boolean, required: true },
    released: { type: Boolean, required: true },
  },
  { versionKey: false, minimize: false },
);
schema.index({ prefix: 1 }, { unique: true });
schema.index({ userId: 1, createdAt: -1, _id: -1 });
// The reclaim of a user's expired tokens (at most the plan's signedTokens of them).
schema.index({ userId: 1, released: 1, expiresAt: 1 });

export function createSignedTokenStore(conn: Connection) {
  const Tokens: Model<SignedTokenRecord> = conn.model<SignedTokenRecord>('SignedToken', schema, 'signedtokens');
  return {
    model: Tokens,

    insert: (token: SignedTokenRecord) => Tokens.create(token),

    byPrefix: (prefix: string) => Tokens.findOne({ prefix }).lean<SignedTokenRecord>().exec(),

    /** The user's tokens, newest first, after `last` (a page position). */
    page: (userId: string, limit: number, last?: { at: number; id: string }) =>
      Tokens.find({ userId, ...(last ? after('createdAt', last) : {}) })
        .sort({ createdAt: -1, _id: -1 })
        .limit(limit)
        .lean<SignedTokenRecord[]>()
        .exec(),

    /** Takes one use if the token is live at `now`; the token after the use, or null. */
    take: (id: string, now: number) =>
      Tokens.findOneAndUpdate(
        { _id: id, revoked: false, expiresAt: { $gt: now }, usesLeft: { $gt: 0 } },
        { $inc: { usesLeft: -1, useCount: 1 }, $set: { lastUsedAt: now } },
        { returnDocument: 'after' },
      )
        .lean<SignedTokenRecord>()
        .exec(),

    /** Gives back a use taken for an upload that failed. */
    async giveBack(id: string): Promise<void> {
      await Tokens.updateOne({ _id: id, useCount: { $gt: 0 } }, { $inc: { usesLeft: 1, useCount: -1 } }).exec();
    },

    /**
     * Revokes the user's token; true when this call released it from the plan's count (it was
     * neither revoked nor reclaimed before), so exactly one caller gives the count back.
     */
    async revoke(userId: string, id: string): Promise<{ found: boolean; released: boolean }> {
      const before = await Tokens.findOneAndUpdate({ _id: id, userId }, { $set: { revoked: true, released: true } })
        .lean<SignedTokenRecord>()
        .exec();
      return { found: before !== null, released: before !== null && !before.released };
    },

    /** Marks the user's expired, unreleased tokens released, one conditional update each;
     * the number this call released. Reads at most the user's live tokens. */
    async releaseExpired(userId: string, now: number): Promise<number> {
      const expired = await Tokens.find({ userId, released: false, expiresAt: { $lte: now } }, { _id: 1 })
        .lean<{ _id: string }[]>()
        .exec();
      let released = 0;
      for (const { _id } of expired) {
        const res = await Tokens.updateOne({ _id, released: false }, { $set: { released: true } }).exec();
        released += res.modifiedCount;
      }
      return released;
    },
  };
}

export type SignedTokenStore = ReturnType<typeof createSignedTokenStore>;
