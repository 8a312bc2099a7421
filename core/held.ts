// Whether content is held, remembered briefly. The gateway and /image ask for every read, a
// page asks for many at once, and a check is one query per kind of holder; a hold found is
// therefore not checked again for HELD_MEMORY_MS (as API keys are remembered). Nothing unheld
// is remembered, so new content is served at once; a released hold is noticed within that time.
import { HELD_MEMORY_MS } from '../infra/constants.js';
import { rememberReads } from '../infra/db/by-id.js';
import type { Database } from '../infra/db/index.js';

export function createHeldMemory(db: Database) {
  // Keys: `<multihash>` for "anyone holds it" (remembered: one of its holders),
  // `<multihash> <userId>` for "this user holds it".
  const memory = rememberReads(async (key: string): Promise<string | true | null> => {
    const [multihash, userId] = key.split(' ') as [string, string | undefined];
    const { users } = await db.holds.of(multihash);
    if (userId === undefined) return users[0] ?? null;
    return users.includes(userId) ? true : null;
  }, HELD_MEMORY_MS);
  return {
    /** One account that holds the content, or null when none does. */
    holder: async (multihash: string) => {
      const found = await memory.get(multihash);
      return typeof found === 'string' ? found : null;
    },
    byUser: async (userId: string, multihash: string) => (await memory.get(`${multihash} ${userId}`)) === true,
  };
}

export type HeldMemory = ReturnType<typeof createHeldMemory>;
