// Every data migration, in order (docs/operations/migrations.md says how to write one). A new
// one is a file `NNNN-name.ts` beside these and a line here; numbers are never reused.
import type { Database } from '../index.js';
import { fileIds } from './0001-file-ids.js';
import type { Migration } from './migration.js';
import { webhookEventIndex } from './0002-webhook-event-index.js';

export const MIGRATIONS: readonly Migration<Database>[] = [fileIds, webhookEventIndex];
