/**
 * When the stack's SQLite databases (FerretDB's and Temporal's, both on a write-ahead log)
 * fsync: 'normal', at the log's checkpoints (a commit survives the end of any process, kill -9
 * included; a power loss or an OS crash may undo the last commits, as on a standalone MongoDB
 * with its default write concern), or 'full', at every commit. STACK_DB_SYNC;
 * docs/architecture/local-stack.md.
 */
export const DB_SYNC_VALUES = ['normal', 'full'] as const;
export type DbSync = (typeof DB_SYNC_VALUES)[number];
export const DEFAULT_DB_SYNC: DbSync = 'normal';
