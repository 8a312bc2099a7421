// `npm run admin -- <command>`: the operator's tool. There is no sign-up endpoint; operators
// create users and their first API key here. It talks to MongoDB directly, so it works beside
// a running `npm start` given the same DATA_DIR (or MONGODB_URI and MASTER_KEY).
import { parseArgs } from 'node:util';
import { loadConfig } from '../../infra/config.js';
import { openDatabase } from '../../infra/db/index.js';
import { createTemporal } from '../../infra/temporal/client.js';
import { sweepJob, type SweepWorkflow } from '../../infra/temporal/contracts/sweep.js';
import { ConfigError } from '../../infra/errors.js';
import { createApiKey, listApiKeys } from '../usecases/apikeys.js';
import { asStupaError, Conflict, InvalidInput, LimitReached, NotFound, StupaError } from '../usecases/errors.js';
import { createUser, getUser, listUsers, setPlan } from '../usecases/users.js';

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
                                               records (a repair, for an idle account)
  sweep --full                                 compare every hold with every Cluster pin and
                                               resync each difference (a running worker does it)`;

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
  if (command === 'sweep') return fullSweep(opts);
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
 * The full reconciliation, as a sweep workflow with `full` (contracts/sweep.ts): it runs in a
 * worker, which has Cluster and Temporal at hand, and this waits for its result. The scheduled
 * sweep only checks what changed; this is for when that is not enough (content changed before
 * the change log existed, a suspicion after an incident).
 */
async function fullSweep(opts: Options): Promise<unknown> {
  if (opts.full !== true) throw new UsageError('sweep needs --full: the scheduled sweep already runs the incremental rounds');
  const config = loadConfig(process.env, ['temporal']);
  const temporal = createTemporal(config.temporal);
  try {
    const queue = config.temporal.taskQueue;
    const started = Date.now();
    const result = await temporal.client.workflow.execute<SweepWorkflow>(sweepJob.workflowType, {
      workflowId: sweepJob.fullWorkflowId(queue),
      taskQueue: sweepJob.taskQueue(queue),
      args: [{ full: true }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    return { ...result, seconds: (Date.now() - started) / 1000 };
  } finally {
    await temporal.close();
  }
}

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
      full: { type: 'boolean' },
    },
  });
  if (values.help) {
    await print(`${usage}\n`);
    return 0;
  }
  const command = positionals.join(' ');
  const result = await run(command, values);
  await print(values.json ? `${JSON.stringify(result, null, 2)}\n` : humanText(result, command));
  return 0;
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
          : err instanceof StupaError
            ? [err.reason, err.details]
            : ['ERROR', err.message];
    if (process.argv.includes('--json')) await print(`${JSON.stringify({ error: { reason, details: message } })}\n`);
    process.stderr.write(`stupa admin: ${message}\n`);
    process.exit(EXIT_CODES.find(([type]) => err instanceof type)?.[1] ?? 1);
  },
);
