// How the hot paths read and write: by `_id` alone.
//
// Why: a read by `_id` is one index lookup on any server, and a key derived from what a record
// is found by (one pin request per user and content; one usage holding document) also makes
// "one per user and content" a unique-key fact rather than a check. (Files are not: the same
// content may be several files of a user, each with its own id, files.ts.) History: FerretDB 1.24 on SQLite
// (the default server) handed SQLite a WHERE clause only for a filter that was exactly
// `{ _id }`; the stack's patched build (stack/patches/ferretdb/) now also serves other
// indexed filters, but reads by `_id` stay the cheapest (measured: 2.2 ms for a findOne by
// `_id` at 200,000 documents, through the MongoDB driver).

/** The `_id` of the user's record of a piece of content (pin request, usage holding document). */
export const userContentKey = (userId: string, multihash: string) => `${userId}:${multihash}`;

/** The user of such a key (user IDs have no `:`). */
export const userOfContentKey = (key: string) => key.slice(0, key.indexOf(':'));

/**
 * Reads of one key asked for in the same turn of the event loop share one database read,
 * which starts on the next turn: no caller gets a read that began before it asked, so
 * nothing is cached. 100 clients polling the same pin cost about one read per turn, not 100.
 * Results are shared between callers: they must not be modified.
 */
export function coalesceReads<T>(read: (id: string) => Promise<T>): (id: string) => Promise<T> {
  const next = new Map<string, Promise<T>>();
  return (id) => {
    let shared = next.get(id);
    if (!shared) {
      shared = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        next.delete(id);
        return read(id);
      });
      next.set(id, shared);
    }
    return shared;
  };
}

/**
 * coalesceReads plus a short memory of what was found: for records every request reads and
 * that change rarely (API keys, users). A change made through this process forgets the
 * entry at once (`forget`); one made by another process is seen within `ttlMs`. Nothing
 * that was not found is remembered, so a record created elsewhere is found at once.
 *
 * The time counts from when the caller asked, before the read was sent, on the monotonic
 * clock: whatever the read returned was stored no later than that, so an entry is never used
 * `ttlMs` after a change stored before its read. That is the bound a writer may wait out to know
 * every process has let go of the old record (core/apikeys.ts deleteApiKey).
 */
export function rememberReads<T>(read: (id: string) => Promise<T | null>, ttlMs: number) {
  const found = new Map<string, { value: T; until: number }>();
  const shared = coalesceReads(read);
  return {
    async get(id: string): Promise<T | null> {
      const asked = performance.now();
      const hit = found.get(id);
      if (hit && hit.until > asked) return hit.value;
      const value = await shared(id);
      if (value === null) found.delete(id);
      else {
        if (found.size >= 10_000) found.clear(); // a bound, not an eviction policy: entries are cheap to read again
        found.set(id, { value, until: asked + ttlMs });
      }
      return value;
    },
    forget(id: string): void {
      found.delete(id);
    },
  };
}
