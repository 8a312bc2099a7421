// Gateway slugs: each user's short, DNS-safe name on the gateway (`<GATEWAY_URL>/<slug>` now;
// the gateway issue makes it serve, and may make it a subdomain, hence DNS-safe: a letter,
// then lower-case letters and digits). Unique because each is claimed first in its own
// collection, `_id` = slug: an insert into a unique `_id` is the one write FerretDB 1.24 makes
// atomic under concurrency, and the lookup the gateway will make (slug → user) by `_id`. The
// user's record holds the slug it was given (infra/db/users.ts); a claim whose user does not
// hold that slug (a process died between claim and assignment) is an orphan that the gateway
// must not serve, so it checks both.
import crypto from 'node:crypto';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { GATEWAY_SLUG_LENGTH, SLUG_MEMORY_MS } from '../constants.js';
import { rememberReads } from './by-id.js';
import { isDuplicateKey } from './errors.js';

interface SlugClaim {
  /** The slug. */
  _id: string;
  userId: string;
  createdAt: number;
}

const schema = new Schema<SlugClaim>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    createdAt: { type: Number, required: true },
  },
  { versionKey: false },
);

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const ALPHABET = `${LETTERS}0123456789`;

/** A random slug: 26 × 36^11 ≈ 3.4e18 of them, so a claim almost never meets a taken one. */
export function randomGatewaySlug(): string {
  let slug = LETTERS[crypto.randomInt(LETTERS.length)]!;
  while (slug.length < GATEWAY_SLUG_LENGTH) slug += ALPHABET[crypto.randomInt(ALPHABET.length)];
  return slug;
}

export function createGatewaySlugStore(conn: Connection) {
  const Slugs: Model<SlugClaim> = conn.model<SlugClaim>('GatewaySlug', schema, 'gateway_slugs');
  // A claim's owner never changes, so the gateway, which asks on every request, remembers it.
  const owners = rememberReads(
    async (slug: string) => (await Slugs.findById(slug).lean<SlugClaim>().exec())?.userId ?? null,
    SLUG_MEMORY_MS,
  );
  return {
    model: Slugs,

    /** Claims a new slug for the user. */
    async claim(userId: string): Promise<string> {
      for (;;) {
        const slug = randomGatewaySlug();
        try {
          await Slugs.create({ _id: slug, userId, createdAt: Date.now() });
          return slug;
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
      }
    },

    /** Gives back a claim the user did not get to use. */
    release: async (slug: string, userId: string): Promise<void> => {
      await Slugs.deleteOne({ _id: slug, userId }).exec();
      owners.forget(slug);
    },

    /** The user who claimed the slug (the gateway also checks that the user holds it). */
    owner: (slug: string): Promise<string | null> => owners.get(slug),
  };
}

export type GatewaySlugStore = ReturnType<typeof createGatewaySlugStore>;
