/**
 * A write refused by a unique index. MongoDB answers E11000 (code 11000). FerretDB 1.24 does
 * too for inserts, but for updates it answers InternalError (code 1) with SQLite's
 * "UNIQUE constraint failed" (measured: a rename onto a sibling folder's name); SQLite refused
 * the whole statement, so it is the same outcome.
 */
export const isDuplicateKey = (err: unknown): boolean => {
  const e = err as { code?: number; message?: string } | null;
  return e?.code === 11000 || (e?.code === 1 && /UNIQUE constraint failed/.test(e.message ?? ''));
};

/**
 * The server did not answer: no connection, or the connection closed under the command (a
 * server killed or restarting). A write that failed so may or may not have been applied.
 */
export function isConnectionFailure(err: unknown): boolean {
  const e = err as { name?: string; message?: string } | null;
  const name = e?.name ?? '';
  if (/^Mongo(Network|NetworkTimeout|NotConnected|ServerSelection|TopologyClosed)Error$|^MongooseServerSelectionError$/.test(name))
    return true;
  // A bulk write (insertMany, bulkWrite) wraps the connection's failure in its own error, with
  // no write errors (measured: "MongoBulkWriteError: connection 8 to 127.0.0.1:… closed" as
  // FerretDB was killed).
  return (
    name === 'MongoBulkWriteError' && /connection .* closed|ECONNRESET|ECONNREFUSED|not connected|Server selection/i.test(e?.message ?? '')
  );
}

/**
 * A command was sent and its connection closed before the answer: the server may have applied
 * it or not. (A failure to reach the server at all, such as server selection timing out, sent
 * nothing.)
 */
export function isAnswerLost(err: unknown): boolean {
  const name = (err as { name?: string } | null)?.name ?? '';
  return isConnectionFailure(err) && /^Mongo(Network|NetworkTimeout|BulkWrite)Error$/.test(name);
}

/**
 * Sends an idempotent write again while the server does not answer, for up to `forMs`: what the
 * driver's retryable writes do on a replica set, which it does not do against a standalone
 * server such as FerretDB. The write must give the same outcome when its first sending was
 * applied (an insert by a known `_id` then meets its own document: the caller tells that apart).
 */
export async function resending<T>(write: () => Promise<T>, forMs: number): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 100; ; wait = Math.min(wait * 2, 1_000)) {
    try {
      return await write();
    } catch (err) {
      if (!isConnectionFailure(err) || Date.now() + wait > until) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
