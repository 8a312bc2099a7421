// Runs the migrations (index.ts) against a database: every process expands at its start, and
// one process at a time migrates in the background, holding a lease (locks.ts) that it renews
// with each page. A process killed mid-page leaves its lease to expire; the next run, here or
// in another process, starts the migration again, and the data says what is left.
import os from 'node:os';
import type { Logger } from 'pino';
import type { Database } from '../index.js';
import { DEFAULT_MIGRATION_PACE } from '../../constants.js';
import { LockTimeout } from '../locks.js';
import { MIGRATIONS } from './index.js';
import { migrationKey, type Migration, type MigrationContext } from './migration.js';
import type { MigrationRecord } from './store.js';

/** How long a run's lease lasts unless renewed: a page takes well under it. */
export const MIGRATION_LEASE_MS = 60_000;
/** How often a process whose runs were refused (another holds the lease) or failed tries again. */
export const MIGRATION_RETRY_MS = 30_000;
const LOCK = 'migrations';

type Migrations = readonly Migration<Database>[];

export interface MigrationRun {
  key: string;
  changed: number;
  ms: number;
  done: boolean;
}

export const processName = (role: string) => `${role}@${os.hostname()}:${process.pid}`;

/** Waits `ms`, or less if the signal is aborted. */
function rest(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** Every migration not done yet expands: before this process serves. */
export async function expandMigrations(db: Database, migrations: Migrations = MIGRATIONS): Promise<void> {
  for (const m of migrations) if (m.expand && !(await db.migrations.isDone(migrationKey(m)))) await m.expand(db);
}

/**
 * Runs what is not done, in order, holding the lease; throws LockTimeout when another process
 * holds it. Returns a run per migration it worked on; one not `done` was stopped by `signal`.
 */
export async function runMigrations(
  db: Database,
  options: { logger: Logger; by: string; signal?: AbortSignal; migrations?: Migrations; pace?: number },
): Promise<MigrationRun[]> {
  const signal = options.signal ?? new AbortController().signal;
  const pace = options.pace ?? DEFAULT_MIGRATION_PACE;
  return db.locks.withLock(
    LOCK,
    async (renew) => {
      const runs: MigrationRun[] = [];
      for (const m of options.migrations ?? MIGRATIONS) {
        const key = migrationKey(m);
        if (await db.migrations.isDone(key)) continue;
        if (signal.aborted) break;
        const started = Date.now();
        await db.migrations.started(key, options.by);
        options.logger.info({ migration: key }, 'migration running in the background');
        // A run resumed after a kill counts on from what the runs before it recorded.
        const before = (await db.migrations.get(key))?.changed ?? 0;
        let changed = 0;
        let working = Date.now();
        const ctx: MigrationContext = {
          signal,
          logger: options.logger,
          async progress(n) {
            changed = n;
            await db.migrations.progress(key, before + n);
            await renew();
            // The requests share the database's writer and its server's CPU: measured at full
            // pace, upload p99 rose from 98 to 497 ms while the migration ran (docs/measurements.md).
            await rest(((Date.now() - working) * (1 - pace)) / pace, signal);
            working = Date.now();
          },
        };
        try {
          changed = await m.migrate(db, ctx);
          if (signal.aborted) {
            runs.push({ key, changed, ms: Date.now() - started, done: false });
            break;
          }
          await m.contract?.(db);
        } catch (err) {
          await db.migrations.failed(key, (err as Error).message).catch(() => undefined);
          throw err;
        }
        await db.migrations.done(key, before + changed);
        const run = { key, changed, ms: Date.now() - started, done: true };
        options.logger.info(run, 'migration done');
        runs.push(run);
      }
      return runs;
    },
    { ttlMs: MIGRATION_LEASE_MS, waitMs: 0 },
  );
}

/** Whether every migration is done (one read each: a handful). */
export async function migrationsDone(db: Database, migrations: Migrations = MIGRATIONS): Promise<boolean> {
  for (const m of migrations) if (!(await db.migrations.isDone(migrationKey(m)))) return false;
  return true;
}

/**
 * Runs the migrations in the background until all are done: a run refused because another
 * process holds the lease, or one that failed, is tried again every MIGRATION_RETRY_MS.
 * `stop` aborts the run at its next page and waits for it.
 */
export function migrateInBackground(
  db: Database,
  options: { logger: Logger; by: string; retryMs?: number; migrations?: Migrations; pace?: number },
): { stop(): Promise<void>; settled: Promise<void> } {
  const abort = new AbortController();
  const retryMs = options.retryMs ?? MIGRATION_RETRY_MS;
  const wait = () => rest(retryMs, abort.signal);
  const settled = (async () => {
    while (!abort.signal.aborted) {
      try {
        if (await migrationsDone(db, options.migrations)) return;
        await runMigrations(db, { ...options, signal: abort.signal });
        continue;
      } catch (err) {
        // Another process migrates: this one waits in case that one dies.
        if (!(err instanceof LockTimeout) && !abort.signal.aborted)
          options.logger.error({ err }, `migration failed; tried again in ${retryMs / 1000} s`);
      }
      await wait();
    }
  })();
  return {
    settled,
    async stop() {
      abort.abort();
      await settled;
    },
  };
}

export interface MigrationStatus extends Partial<Omit<MigrationRecord, 'state'>> {
  key: string;
  state: MigrationRecord['state'] | 'pending';
}

/** Each migration there is and what its record says (`npm run admin -- migrations`). */
export async function migrationStatus(db: Database, migrations: Migrations = MIGRATIONS): Promise<MigrationStatus[]> {
  const records = new Map((await db.migrations.all()).map((r) => [r._id, r]));
  return migrations.map((m) => {
    const key = migrationKey(m);
    const record = records.get(key);
    return record ? { ...record, key } : { key, state: 'pending' as const };
  });
}
