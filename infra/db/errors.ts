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
