// `npm run admin -- <command>`: the operator's tool. There is no sign-up endpoint; operators
// create users and their first API key here. It talks to MongoDB directly, so it works beside
// a running `npm start` given the same DATA_DIR (or MONGODB_URI and MASTER_KEY).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../../infra/paths.js';
import { loadConfig } from '../../infra/config.js';
import { openDatabase } from '../../infra/db/index.js';
import { createTemporal } from '../../infra/temporal/client.js';
import { auditJob, type AuditReport, type AuditWorkflow } from '../../infra/temporal/contracts/audit.js';
import { ConfigError, TemporalSetupError } from '../../infra/errors.js';
import { createApiKey, listApiKeys } from '../../core/apikeys.js';
import { asStupaError, Conflict, InvalidInput, LimitReached, NotFound, StupaError } from '../../core/errors.js';
import { createUser, getUser, listUsers, setPlan } from '../../core/users.js';
import { recordRestore } from '../../core/restores.js';
import { temporalCommand, temporalText, type TemporalReport } from './temporal.js';
import { versionsCommand, versionsText, type VersionsReport } from './versions.js';
import { migrationsCommand, migrationsText } from './migrations.js';
import { createLogger } from '../../infra/logger.js';
import type { MigrationStatus } from '../../infra/db/migrations/runner.js';

const usage = `usage: npm run admin -- <command> [options] [--json]
  users create --email E --name N [--plan P]   create a user and its first API key
  users list [--limit N] [--after ID]          list users, newest first, N a page (default 50,
                                               at most 1000); the last line names the next page
  users set-plan --user ID --plan P            change a user's plan
  keys create --user ID [--name N] [--expires-in SECONDS]
  keys list --user ID                          list a user's keys (never the full keys)
  plans                                        list the configured plans
  usage recount --user ID                      recompute a user's storage counter (distinct content:
                                               held as a file and a pin counts once) from the
                                               records (a repair; the user's writes wait ~30 s)
  check [--repair]                             the audit: holds, Cluster and Kubo, counters, parts and
                                               workflows compared (a running worker does it); exit 0
                                               only when nothing disagrees; --repair fixes what has one
                                               safe repair and says what it did
  check --last                                 the last audit's report (the scheduled one, or a check)
  temporal setup                               register the Temporal namespace (TEMPORAL_RETENTION_DAYS)
                                               and the search attributes it lacks; what exists is left
  temporal check                               exit 0 when the namespace and search attributes are
                                               there, 1 saying what is missing
  temporal versions                            the worker deployment's builds: which is current, which
                                               still run workflows (draining) and which are drained
  temporal promote [--build-id B]              make build B (default: this checkout's) current: new
                                               workflows, and those that move with upgrades, go to it
  backup DIR                                   the local stack (npm start): an online backup into DIR
  restore DIR                                  the local stack: a backup into an empty DATA_DIR, stopped
  restored --taken-at TIME                     after restoring MongoDB with its own tools: records the
                                               backup's time (ISO 8601), so the audit keeps content
                                               pinned after it (docs/operations/upgrades-and-backups.md)
  migrations                                   the data migrations: done, running (how far, by whom)
                                               or not started (docs/operations/migrations.md)
  migrations run                               run those not done now, in the foreground (the API
                                               processes run them in the background by themselves)`;

/** backup and restore work on the local stack's files and binaries (stack/backup-cli.ts). The admin
 * tool is production code, which never imports the local stack: it runs that file as a process of
 * its own, and where it is absent (a production image) says where the procedure is. */
function localStackCommand(args: string[]): number {
  const cli = path.join(projectRoot, 'stack', 'backup-cli.ts');
  if (!fs.existsSync(cli)) {
    process.stderr.write('stupa admin: backup and restore are for the local stack; production: docs/operations/upgrades-and-backups.md\n');
    return 2;
  }
  return spawnSync(process.execPath, ['--import', 'tsx', cli, ...args], { stdio: 'inherit' }).status ?? 1;
}

class UsageError extends Error {}

/** Exit codes: 2 when the command's words are wrong (usage, an unknown plan or user), 1 for
 * every other failure. */
const EXIT_CODES: [new (...args: never[]) => Error, number][] = [
  [UsageError, 2],
  [InvalidInput, 2],
  [NotFound, 2],
  [Conflict, 1],
  [LimitReached, 1],
  [StupaError, 1],
  [ConfigError, 1],
  [TemporalSetupError, 1],
];

type Options = Record<string, string | boolean | undefined>;

function required(opts: Options, name: string): string {
  const value = opts[name];
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`--${name} is required`);
  return value.trim();
}

const optional = (opts: Options, name: string) => (typeof opts[name] === 'string' ? (opts[name] as string) : undefined);

const publicUser = (u: { _id: string; email: string; name: string; plan: string; createdAt: number }) => ({
  userId: u._id,
  email: u.email,
  name: u.name,
  plan: u.plan,
  createdAt: u.createdAt,
});

async function run(command: string, opts: Options): Promise<unknown> {
  if (command === 'check') return audit(opts);
  if (command === 'temporal versions' || command === 'temporal promote') {
    return versionsCommand(
      loadConfig(process.env, ['temporal']),
      command === 'temporal promote' ? 'promote' : 'versions',
      optional(opts, 'build-id'),
    );
  }
  if (command === 'temporal setup' || command === 'temporal check') {
    return temporalCommand(loadConfig(process.env, ['temporal']), command === 'temporal setup' ? 'setup' : 'check');
  }
  const config = loadConfig(process.env, ['mongodb']);
  if (command === 'plans') return [...config.plans.byName.values()];
  const db = await openDatabase(config.mongodbUri);
  const deps = { db, config };
  try {
    switch (command) {
      case 'users create': {
        const email = required(opts, 'email');
        const { user, apiKey, keyPrefix } = await createUser(deps, { email, name: required(opts, 'name'), plan: optional(opts, 'plan') });
        return { ...publicUser(user), apiKey, keyPrefix };
      }
      case 'users list': {
        const limit = opts.limit === undefined ? undefined : Number(opts.limit);
        const { users, next } = await listUsers(deps, { limit, after: optional(opts, 'after') });
        return { users: users.map(publicUser), next };
      }
      case 'users set-plan':
        return publicUser(await setPlan(deps, required(opts, 'user'), required(opts, 'plan')));
      case 'keys create': {
        const user = await getUser(deps, required(opts, 'user'));
        // The use-case checks the range (InvalidInput: exit 2).
        const expiresIn = opts['expires-in'] === undefined ? undefined : Number(opts['expires-in']);
        const key = await createApiKey(deps, {
          userId: user._id,
          maxKeys: config.plans.get(user.plan).apiKeys,
          name: optional(opts, 'name'),
          expiresIn,
        });
        return { userId: user._id, ...key };
      }
      case 'keys list':
        return await listApiKeys(deps, (await getUser(deps, required(opts, 'user')))._id);
      case 'restored': {
        const takenAt = new Date(required(opts, 'taken-at'));
        if (Number.isNaN(takenAt.getTime())) throw new UsageError('--taken-at must be a time, e.g. 2026-11-29T10:00:00Z');
        await recordRestore(db, { takenAt });
        return { restored: true, takenAt: takenAt.toISOString() };
      }
      case 'migrations':
      case 'migrations run':
        return await migrationsCommand(db, command === 'migrations run' ? 'run' : 'status', createLogger('silent'));
      case 'usage recount': {
        const user = await getUser(deps, required(opts, 'user'));
        const { files, pinned, used } = await db.usage.recount(user._id);
        return { userId: user._id, files, pinned, used };
      }
      default:
        throw new UsageError(`unknown command: ${command || '(none)'}`);
    }
  } finally {
    await db.close();
  }
}

/**
 * The audit (contracts/audit.ts), run as a workflow in a worker, which has Cluster, Kubo and
 * Temporal at hand; this waits for its report. An audit asked for while one runs joins it.
 */
async function audit(opts: Options): Promise<AuditReport> {
  if (opts.last === true) {
    const config = loadConfig(process.env, ['mongodb']);
    const db = await openDatabase(config.mongodbUri);
    try {
      const last = await db.audits.last();
      if (!last) throw new NotFound('audit report (none has run yet)');
      return last;
    } finally {
      await db.close();
    }
  }
  const config = loadConfig(process.env, ['temporal']);
  const temporal = createTemporal(config.temporal);
  try {
    const queue = config.temporal.taskQueue;
    return await temporal.client.workflow.execute<AuditWorkflow>(auditJob.workflowType, {
      workflowId: auditJob.onDemandId(queue),
      taskQueue: auditJob.taskQueue(queue),
      args: [{ repair: opts.repair === true }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
  } finally {
    await temporal.close();
  }
}

/** An audit's report for a terminal: what was compared, what disagreed, what was repaired. */
function auditText(report: AuditReport): string {
  const counts = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  const found = Object.values(report.found).reduce((a, b) => a + b, 0);
  const lines = [
    `audit of ${new Date(report.startedAt).toISOString()}, ${((report.finishedAt - report.startedAt) / 1000).toFixed(1)} s${report.repair ? ', with --repair' : ''}`,
    `compared: ${counts(report.checked)}`,
    found === 0
      ? 'no disagreements'
      : `disagreements: ${counts(Object.fromEntries(Object.entries(report.found).filter(([, n]) => n > 0)))}`,
    ...report.disagreements.map((d) => `  ${d.kind} ${d.subject}: ${d.detail}${d.repaired ? ` (repaired: ${d.repaired})` : ''}`),
  ];
  if (found > report.disagreements.length) lines.push(`  … ${found - report.disagreements.length} more not listed`);
  if (report.repair) lines.push(`repaired: ${report.repaired}`);
  return `${lines.join('\n')}\n`;
}

const disagreements = (report: AuditReport) => Object.values(report.found).reduce((a, b) => a + b, 0);

const rowsText = (rows: object[]) =>
  rows
    .map(
      (row) =>
        Object.entries(row)
          .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}\n`)
          .join('') + '\n',
    )
    .join('');

/** `key: value` lines, a blank line between records; a page ends with how to get the next. */
function humanText(result: unknown, command: string): string {
  if (result && typeof result === 'object' && 'next' in result && 'users' in result) {
    const page = result as { users: object[]; next: string | null };
    return rowsText(page.users) + (page.next ? `next page: npm run admin -- ${command} --after ${page.next}\n` : '');
  }
  return rowsText(Array.isArray(result) ? result : [result as object]);
}

// process.exit does not wait for a pipe to take what was written: a long listing piped to
// another program was cut short. Exit only once stdout has taken it all.
const print = (text: string) => new Promise<void>((resolve) => process.stdout.write(text, () => resolve()));

async function main(): Promise<number> {
  const first = process.argv.slice(2).find((arg) => !arg.startsWith('-'));
  if (first === 'backup' || first === 'restore') return localStackCommand(process.argv.slice(2));
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      email: { type: 'string' },
      name: { type: 'string' },
      plan: { type: 'string' },
      user: { type: 'string' },
      'expires-in': { type: 'string' },
      limit: { type: 'string' },
      after: { type: 'string' },
      repair: { type: 'boolean' },
      last: { type: 'boolean' },
      'taken-at': { type: 'string' },
      'build-id': { type: 'string' },
    },
  });
  if (values.help) {
    await print(`${usage}\n`);
    return 0;
  }
  const command = positionals.join(' ');
  const result = await run(command, values);
  const isAudit = command === 'check';
  const text = isAudit
    ? auditText(result as AuditReport)
    : command === 'temporal versions' || command === 'temporal promote'
      ? versionsText(result as VersionsReport)
      : command.startsWith('temporal ')
        ? temporalText(result as TemporalReport)
        : command.startsWith('migrations')
          ? migrationsText(result as MigrationStatus[])
          : humanText(result, command);
  await print(values.json ? `${JSON.stringify(result, null, 2)}\n` : text);
  // The audit's exit code says whether anything disagreed, for scripts and cron.
  return isAudit && disagreements(result as AuditReport) > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (thrown: unknown) => {
    const parseError = String((thrown as { code?: string }).code).startsWith('ERR_PARSE_ARGS');
    const err = parseError ? new UsageError((thrown as Error).message) : (asStupaError(thrown) ?? (thrown as Error));
    const [reason, message] =
      err instanceof UsageError
        ? ['USAGE', `${err.message}\n${usage}`]
        : err instanceof ConfigError
          ? ['CONFIG', err.message]
          : err instanceof TemporalSetupError
            ? ['TEMPORAL_SETUP', err.message]
            : err instanceof StupaError
              ? [err.reason, err.details]
              : ['ERROR', err.message];
    if (process.argv.includes('--json')) await print(`${JSON.stringify({ error: { reason, details: message } })}\n`);
    process.stderr.write(`stupa admin: ${message}\n`);
    process.exit(EXIT_CODES.find(([type]) => err instanceof type)?.[1] ?? 1);
  },
);
