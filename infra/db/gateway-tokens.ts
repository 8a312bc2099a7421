// Gateway tokens: what a reader presents to an account's gateway when the account requires
// one. Found by prefix (`_id`, the token's first 12 characters) and compared by SHA-256
// digest, like API keys, and remembered like them: a token found is kept for AUTH_MEMORY_MS
// (by-id.ts; reads of tokens not kept share one query: batch.ts), and a token's deletion answers
// only after that time (core/gateway-access.ts), so once answered it stops working in
// every process.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { AUTH_MEMORY_MS } from '../constants.js';
import { batchedById } from './batch.js';
import { rememberReads } from './by-id.js';
import { count } from './count.js';
import { createUseRecorder } from './last-used.js';

export interface GatewayToken {
  /** The token's first 12 characters. */
  _id: string;
  userId: string;
  digest: string;
  name: string;
  createdAt: number;
  expiresAt: number | null;
  lastUsedAt: number | null;
}

const schema = new Schema<GatewayToken>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true, index: true },
    digest: { type: String, required: true },
    name: { type: String, required: true },
    createdAt: { type: Number, required: true },
    expiresAt: { type: Number, default: null },
    lastUsedAt: { type: Number, default: null },
  },
  { versionKey: false },
);

export function createGatewayTokenStore(conn: Connection) {
  const Tokens: Model<GatewayToken> = conn.model<GatewayToken>('GatewayToken', schema, 'gatewaytokens');
  const remembered = rememberReads(batchedById(Tokens), AUTH_MEMORY_MS);
  const get = remembered.get;
  const uses = createUseRecorder(Tokens);

  return {
    model: Tokens,
    insert: (token: GatewayToken) => Tokens.create(token),
    get,
    countForUser: (userId: string) => count(Tokens, { userId }),

    async listForUser(userId: string): Promise<GatewayToken[]> {
      const rows = await Tokens.find({ userId }).sort({ createdAt: 1, _id: 1 }).lean<GatewayToken[]>().exec();
      return rows.map(uses.withPending);
    },

    async delete(userId: string, prefix: string): Promise<boolean> {
      const res = await Tokens.deleteOne({ _id: prefix, userId }).exec();
      uses.forget(prefix);
      remembered.forget(prefix);
      return res.deletedCount === 1;
    },

    /** lastUsedAt, written in batches (last-used.ts). */
    recordUse: uses.record,
    flush: uses.flush,
  };
}

export type GatewayTokenStore = ReturnType<typeof createGatewayTokenStore>;
