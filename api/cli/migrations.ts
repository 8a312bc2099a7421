// `npm run admin -- migrations [run]`: which data migrations have run (infra/db/migrations/), and
// running the pending ones in the foreground, for an operator who would rather wait for them
// than leave them to the API processes' background run (a run in progress elsewhere is not
// waited for: its lease says who runs it).
import type { Database } from '../../infra/db/index.js';
import { LockTimeout } from '../../infra/db/locks.js';
import { migrationStatus, processName, runMigrations, type MigrationStatus } from '../../infra/db/migrations/runner.js';
import { Conflict } from '../../core/errors.js';
import type { Logger } from '../../infra/logger.js';

export async function migrationsCommand(db: Database, action: 'status' | 'run', logger: Logger): Promise<MigrationStatus[]> {
  if (action === 'run') {
    try {
      await runMigrations(db, { logger, by: processName('admin') });
    } catch (err) {
      if (!(err instanceof LockTimeout)) throw err;
      throw new Conflict(
        'MIGRATIONS_RUNNING',
        'another process is running the migrations: npm run admin -- migrations shows how far it got',
      );
    }
  }
  return migrationStatus(db);
}

const time = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString() : '-');

export function migrationsText(status: MigrationStatus[]): string {
  const lines = status.map((m) => {
    const detail =
      m.state === 'pending'
        ? 'not started'
        : `${(m.changed ?? 0).toLocaleString('en')} records changed, started ${time(m.startedAt)}` +
          (m.state === 'done' ? `, done ${time(m.doneAt)}` : `, last ${time(m.updatedAt)} by ${m.by}`) +
          (m.error ? `; last error: ${m.error}` : '');
    return `${m.key}  ${m.state.padEnd(7)}  ${detail}`;
  });
  return `${lines.join('\n')}\n`;
}
