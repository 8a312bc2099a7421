import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { randomBase62 } from '../secrets.js';
import { AUTH_MEMORY_MS } from '../constants.js';
import { rememberReads } from './by-id.js';
import { isDuplicateKey } from './errors.js';
import { after } from './pages.js';
import { createGatewaySlugStore } from './gateway-slugs.js';

/** Who may use the user's gateway. Stored on the user with these defaults; the gateway issue
 * makes them editable (PUT /gateway-settings) and enforces them. */
export interface GatewaySettings {
  tokenRequired: boolean;
  allowedOrigins: string[];
  ipAllowlist: string[];
}

export const defaultGatewaySettings = (): GatewaySettings => ({ tokenRequired: false, allowedOrigins: [], ipAllowlist: [] });

export interface User {
  _id: string;
  email: string;
  name: string;
  plan: string;
  /** The user's name on the gateway (gateway-slugs.ts); absent on users from before slugs
   * until `gatewaySlugOf` gives them one. */
  gatewaySlug?: string;
  /** Absent on users from before: the defaults. */
  gateway?: GatewaySettings;
  /** Event types any of the user's webhooks took (core/webhook-events.ts); only grows. */
  webhookEvents?: string[];
  createdAt: number;
  updatedAt: number;
}

const schema = new Schema<User>(
  {
    _id: { type: String, required: true },
    email: { type: String, required: true, unique: true },
    name: { type: String, required: true },
    plan: { type: String, required: true },
    gatewaySlug: { type: String },
    gateway: { type: Schema.Types.Mixed },
    webhookEvents: { type: [String], default: undefined },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
  },
  { versionKey: false },
);
// The operator's list, newest first, a page at a time (api/cli/admin.ts).
schema.index({ createdAt: -1, _id: -1 });

export function createUserStore(conn: Connection) {
  const Users: Model<User> = conn.model<User>('User', schema, 'users');
  const byId = rememberReads((userId: string) => Users.findById(userId).lean<User>().exec(), AUTH_MEMORY_MS);
  const slugs = createGatewaySlugStore(conn);
  return {
    model: Users,
    slugs,

    /** The new user, or null when the email is taken. */
    async create(input: { email: string; name: string; plan: string }): Promise<User | null> {
      const now = Date.now();
      const _id = `usr_${randomBase62(16)}`;
      const doc: User = {
        _id,
        ...input,
        email: input.email.toLowerCase(),
        gatewaySlug: await slugs.claim(_id),
        gateway: defaultGatewaySettings(),
        createdAt: now,
        updatedAt: now,
      };
      try {
        await Users.create(doc);
      } catch (err) {
        await slugs.release(doc.gatewaySlug!, _id);
        if (isDuplicateKey(err)) return null;
        throw err;
      }
      return doc;
    },

    /**
     * The user's gateway slug, given now to a user from before slugs: a claimed slug is set only
     * where none is (one conditional update), so of concurrent requests one assigns and the
     * others give their claim back and read the slug it set.
     */
    async gatewaySlugOf(user: User): Promise<string> {
      if (user.gatewaySlug) return user.gatewaySlug;
      const slug = await slugs.claim(user._id);
      const set = await Users.updateOne({ _id: user._id, gatewaySlug: null }, { $set: { gatewaySlug: slug } }).exec();
      byId.forget(user._id);
      if (set.matchedCount === 1) return slug;
      await slugs.release(slug, user._id);
      const current = await Users.findById(user._id, { gatewaySlug: 1 }).lean<Pick<User, 'gatewaySlug'>>().exec();
      if (!current?.gatewaySlug) throw new Error(`user ${user._id} has no gateway slug and cannot be given one`);
      return current.gatewaySlug;
    },

    /** Read at most once per AUTH_MEMORY_MS (by-id.ts): every request reads its user. */
    get: byId.get,

    /** Newest first, at most `limit`; `after` is the previous page's last user (null when that
     * user is gone: the caller cannot continue from it). */
    async list(limit: number, afterUserId?: string): Promise<User[] | null> {
      let filter = {};
      if (afterUserId) {
        const last = await Users.findById(afterUserId, { createdAt: 1 }).lean<Pick<User, '_id' | 'createdAt'>>().exec();
        if (!last) return null;
        filter = after('createdAt', { at: last.createdAt, id: last._id });
      }
      return Users.find(filter).sort({ createdAt: -1, _id: -1 }).limit(limit).lean<User[]>().exec();
    },

    async setPlan(userId: string, plan: string): Promise<User | null> {
      const user = await Users.findByIdAndUpdate(userId, { $set: { plan, updatedAt: Date.now() } }, { returnDocument: 'after' })
        .lean<User>()
        .exec();
      byId.forget(userId);
      return user;
    },

    /** Adds event types to those the user's webhooks take (core/webhook-events.ts). */
    async addWebhookEvents(userId: string, events: string[]): Promise<void> {
      await Users.updateOne({ _id: userId }, { $addToSet: { webhookEvents: { $each: events } } }).exec();
      byId.forget(userId);
    },

    /** Replaces the user's gateway settings (all three fields at once). */
    async setGatewaySettings(userId: string, gateway: GatewaySettings): Promise<void> {
      await Users.updateOne({ _id: userId }, { $set: { gateway, updatedAt: Date.now() } }).exec();
      byId.forget(userId);
    },
  };
}

export type UserStore = ReturnType<typeof createUserStore>;
