// `npm run admin -- <command>`: the operator's tool. There is no sign-up endpoint; operators
// create users and their first API key here. It talks to MongoDB directly, so it works beside
// a running `npm start` given the same DATA_DIR (or MONGODB_URI and MASTER_KEY).
import { parseArgs } from 'node:util';
import { createApiKey, listApiKeys } from '../../api/apikeys/service.js';
import { ApiError, EmailTaken } from '../../api/errors.js';
import { loadConfig } from '../config.js';
import { openDatabase, type Database } from '../db/index.js';
import { ConfigError } from '../errors.js';
import type { Plans } from '../plans.js';

const usage = `usage: npm run admin -- <command> [options] [--json]
  users create --email E --name N [--plan P]   create a user and its first API key
  users list                                   list users
  users set-plan --user ID --plan P            change a user's plan
  keys create --user ID [--name N] [--expires-in SECONDS]
  keys list --user ID                          list a user's keys (never the full keys)
  plans                                        list the configured plans`;

class UsageError extends Error {}

type Options = Record<string, string | boolean | undefined>;

function required(opts: Options, name: string): string {
  const value = opts[name];
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`--${name} is required`);
  return value.trim();
}

function checkPlan(plans: Plans, plan: string): string {
  if (!plans.byName.has(plan)) throw new UsageError(`unknown plan ${plan}; plans: ${[...plans.byName.keys()].join(', ')}`);
  return plan;
}

async function userOrFail(db: Database, userId: string) {
  const user = await db.users.get(userId);
  if (!user) throw new UsageError(`no user ${userId}`);
  return user;
}

const publicUser = (u: { _id: string; email: string; name: string; plan: string; createdAt: number }) => ({
  userId: u._id,
  email: u.email,
  name: u.name,
  plan: u.plan,
  createdAt: u.createdAt,
});

async function run(command: string, opts: Options): Promise<unknown> {
  const config = loadConfig(process.env, ['mongodb']);
  if (command === 'plans') return [...config.plans.byName.values()];
  const db = await openDatabase(config.mongodbUri);
  const keyDeps = { db, masterKey: config.masterKey };
  try {
    switch (command) {
      case 'users create': {
        const email = required(opts, 'email');
        if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new UsageError(`--email ${email} is not an email address`);
        const plan = checkPlan(config.plans, typeof opts.plan === 'string' ? opts.plan : config.plans.defaultPlan);
        const user = await db.users.create({ email, name: required(opts, 'name'), plan });
        if (!user) throw new EmailTaken(email.toLowerCase());
        const key = await createApiKey(keyDeps, { userId: user._id, maxKeys: config.plans.get(plan).apiKeys });
        return { ...publicUser(user), apiKey: key.apiKey, keyPrefix: key.keyPrefix };
      }
      case 'users list':
        return (await db.users.list()).map(publicUser);
      case 'users set-plan': {
        const userId = required(opts, 'user');
        const plan = checkPlan(config.plans, required(opts, 'plan'));
        await userOrFail(db, userId);
        return publicUser((await db.users.setPlan(userId, plan))!);
      }
      case 'keys create': {
        const user = await userOrFail(db, required(opts, 'user'));
        const expiresIn = opts['expires-in'] === undefined ? undefined : Number(opts['expires-in']);
        if (expiresIn !== undefined && !(Number.isInteger(expiresIn) && expiresIn >= 60)) {
          throw new UsageError('--expires-in takes whole seconds, at least 60');
        }
        const name = typeof opts.name === 'string' ? opts.name : undefined;
        return {
          userId: user._id,
          ...(await createApiKey(keyDeps, { userId: user._id, maxKeys: config.plans.get(user.plan).apiKeys, name, expiresIn })),
        };
      }
      case 'keys list': {
        const user = await userOrFail(db, required(opts, 'user'));
        return await listApiKeys(keyDeps, user._id);
      }
      default:
        throw new UsageError(`unknown command: ${command || '(none)'}`);
    }
  } finally {
    await db.close();
  }
}

function printHuman(result: unknown): void {
  const rows = Array.isArray(result) ? result : [result];
  for (const row of rows) {
    for (const [k, v] of Object.entries(row as object))
      process.stdout.write(`${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}\n`);
    process.stdout.write('\n');
  }
}

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
    },
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const result = await run(positionals.join(' '), values);
  if (values.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else printHuman(result);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    const json = process.argv.includes('--json');
    const [reason, message] =
      err instanceof UsageError || String((err as { code?: string }).code).startsWith('ERR_PARSE_ARGS')
        ? ['USAGE', `${(err as Error).message}\n${usage}`]
        : err instanceof ConfigError
          ? ['CONFIG', err.message]
          : err instanceof ApiError
            ? [err.reason, err.details]
            : ['ERROR', (err as Error).message];
    if (json) process.stdout.write(`${JSON.stringify({ error: { reason, details: message } })}\n`);
    process.stderr.write(`stupa admin: ${message}\n`);
    process.exit(reason === 'USAGE' ? 2 : 1);
  },
);
