// A process that runs the pending data migrations and exits: what tests/migrations.test.ts kills
// partway (node --import tsx tests/support/migrate-child.ts <mongodb uri>).
import { openDatabase } from '../../infra/db/index.js';
import { processName, runMigrations } from '../../infra/db/migrations/runner.js';
import { createLogger } from '../../infra/logger.js';

const db = await openDatabase(process.argv[2]!);
await runMigrations(db, { logger: createLogger('silent'), by: processName('test-child') });
await db.close();
