// Whether content is held, remembered briefly. The gateway and /image ask for every read, a
// page asks for many at once, and a check is one query per kind of holder; a hold found is
// therefore not checked again for HELD_MEMORY_MS (as API keys are remembered). Nothing unheld
// is remembered, so new content is served at once; a released hold is noticed within that time.
import { HELD_MEMORY_MS } from '../../infra/constants.js';
import { rememberReads } from '../../infra/db/by-id.js';
import type { Database } from '../../infra/db/index.js';

export function createHeldMemory(db: Database) {
  // Keys: `<multihash>` for "anyone holds it", `<multihash> <userId>` for "this user holds it".
  const memory = rememberReads(async (key: string) => {
    const [multihash, userId] = key.split(' ') as [string, string | undefined];
    const { users } = await db.holds.of(multihash);
    return (userId === undefined ? users.length > 0 : users.includes(userId)) ? true : null;
  }, HELD_MEMORY_MS);
  return {
    byAnyone: async (multihash: string) => (await memory.get(multihash)) === true,
    byUser: async (userId: string, multihash: string) => (await memory.get(`${multihash} ${userId}`)) === true,
  };
}

export type HeldMemory = ReturnType<typeof createHeldMemory>;
