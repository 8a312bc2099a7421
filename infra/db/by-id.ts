// How the hot paths read and write: by `_id` alone.
//
// Why: FerretDB 1.24 on SQLite (the default server) hands SQLite a WHERE clause only for a
// filter that is exactly `{ _id: <string> }`; any other filter, even `{ _id, userId }`, reads
// and decodes the whole collection. Measured here with 1,000 documents: 1-2 ms a lookup by
// `_id`, 9-19 ms by `{ userId, multihash }`, growing with the collection. So records that are
// looked up per request get a key derived from what they are found by (one pin request and
// one file record per user and content), and extra conditions are checked after the read.
// On a real MongoDB the same queries use the `_id` index.

/** The `_id` of the user's record of a piece of content (pin request, file). */
export const userContentKey = (userId: string, multihash: string) => `${userId}:${multihash}`;

/**
 * Reads of one key that overlap share one database read, and a caller never gets a read that
 * started before it asked (it waits for the next one), so no answer is older than the request:
 * nothing is cached. 100 clients polling the same pin cost one read at a time, not 100.
 * Results are shared between callers: they must not be modified.
 */
export function coalesceReads<T>(read: (id: string) => Promise<T>): (id: string) => Promise<T> {
  const running = new Map<string, Promise<T>>();
  const queued = new Map<string, Promise<T>>();
  const start = (id: string): Promise<T> => {
    const p = read(id).finally(() => {
      if (running.get(id) === p) running.delete(id);
    });
    running.set(id, p);
    return p;
  };
  return (id) => {
    const current = running.get(id);
    if (!current) return start(id);
    // A read is under way, begun before this call: join the one that starts after it.
    let next = queued.get(id);
    if (!next) {
      next = current
        .catch(() => undefined)
        .then(() => {
          queued.delete(id);
          // A read another caller began since then also began after this one asked.
          return running.get(id) ?? start(id);
        });
      queued.set(id, next);
    }
    return next;
  };
}
