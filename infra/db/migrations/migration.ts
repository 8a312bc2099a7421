// What a data migration is (docs/operations/migrations.md). Each is numbered, runs once per
// database, and is recorded in `migrations` (store.ts) when it starts and when it is done.
// Its three steps follow expand/contract, so that the release before and this one can serve
// the same database while it runs:
//   expand   before this process serves: quick and idempotent, and harmless to the release
//            before (an index, a field with a default); run by every process at its start.
//   migrate  in the background while both releases serve: in pages, idempotent, resumable
//            after a kill from what the data itself says (a page done is never done again).
//            Until it is done this release reads both shapes.
//   contract once migrate is done: quick. What the release before would not survive (dropping
//            a field it reads) is a later migration, shipped in a later release.
import type { Logger } from 'pino';

export interface MigrationContext {
  /** Aborted when the process stops: return (or throw) at the next page; the next run resumes. */
  signal: AbortSignal;
  logger: Logger;
  /** Records how many records it has changed so far (shown by `admin migrations`) and renews
   * the lease that keeps other processes from running migrations at the same time. */
  progress(changed: number): Promise<void>;
}

export interface Migration<Db> {
  /** Its number: migrations run in this order, each once the one before is done. */
  id: number;
  /** Plain words, kebab-case: `file-ids`. */
  name: string;
  expand?(db: Db): Promise<void>;
  /** Returns how many records it changed. */
  migrate(db: Db, ctx: MigrationContext): Promise<number>;
  contract?(db: Db): Promise<void>;
}

/** `0001-file-ids`: the record's `_id` in `migrations`. */
export const migrationKey = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}-${m.name}`;
