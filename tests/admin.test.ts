import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ApiServer } from '../api/server.js';
import { openDatabase } from '../infra/db/index.js';
import { call, databaseUri, stack, startTestApi, tempDir } from './support/stack.js';

const exec = promisify(execFile);
const masterKey = crypto.randomBytes(32).toString('hex');
let dataDir: string;
let api: ApiServer;

/** Runs the CLI as an operator would beside `npm start`: only DATA_DIR is given. */
async function admin(...words: (string | { dataDir: string })[]): Promise<{ code: number; out: any; stderr: string }> {
  const args = words.filter((w): w is string => typeof w === 'string');
  const dir = words.find((w): w is { dataDir: string } => typeof w !== 'string')?.dataDir ?? dataDir;
  try {
    const { stdout, stderr } = await exec('npx', ['tsx', 'api/cli/admin.ts', ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dir },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, out: args.includes('--json') ? JSON.parse(stdout) : stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: args.includes('--json') && e.stdout ? JSON.parse(e.stdout) : e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  dataDir = tempDir();
  fs.writeFileSync(path.join(dataDir, 'stack.json'), JSON.stringify({ endpoints: { mongodbUri: stack.mongodbUri } }));
  fs.writeFileSync(path.join(dataDir, 'master.key'), masterKey);
  api = await startTestApi({ MASTER_KEY: masterKey });
});
afterAll(() => api.close());

test('users create prints the user and a working API key', async () => {
  const email = `${crypto.randomUUID()}@Example.test`;
  const res = await admin('users', 'create', '--email', email, '--name', 'Ada', '--plan', 'bodhi', '--json');
  expect(res.code).toBe(0);
  expect(res.out).toEqual({
    userId: expect.stringMatching(/^usr_/),
    email: email.toLowerCase(),
    name: 'Ada',
    plan: 'bodhi',
    createdAt: expect.any(Number),
    apiKey: expect.stringMatching(/^stp_/),
    keyPrefix: res.out.apiKey.slice(0, 12),
  });
  const keys = await call(api, 'GET', '/apikeys', { key: res.out.apiKey });
  expect(keys.status).toBe(200);
  expect(keys.body).toEqual([expect.objectContaining({ keyPrefix: res.out.keyPrefix, keyName: 'Default' })]);
  expect(keys.headers.get('x-ratelimit-limit')).toBe('600');

  // The same email again is refused.
  const again = await admin('users', 'create', '--email', email, '--name', 'Ada', '--json');
  expect(again.code).toBe(1);
  expect(again.out.error.reason).toBe('EMAIL_TAKEN');

  // set-plan changes what the API enforces.
  const changed = await admin('users', 'set-plan', '--user', res.out.userId, '--plan', 'karma', '--json');
  expect(changed.out.plan).toBe('karma');
  expect((await call(api, 'GET', '/apikeys', { key: res.out.apiKey })).headers.get('x-ratelimit-limit')).toBe('1800');

  // keys create adds a working key; keys list never shows full keys.
  const key = await admin('keys', 'create', '--user', res.out.userId, '--name', 'deploy', '--expires-in', '3600', '--json');
  expect(key.out).toMatchObject({ userId: res.out.userId, keyName: 'deploy', apiKey: expect.stringMatching(/^stp_/) });
  expect(key.out.expiresAt - key.out.createdAt).toBe(3_600_000);
  expect((await call(api, 'GET', '/apikeys', { key: key.out.apiKey })).status).toBe(200);
  const keys2 = await admin('keys', 'list', '--user', res.out.userId, '--json');
  expect(keys2.out.map((k: { keyName: string }) => k.keyName)).toEqual(['Default', 'deploy']);
  expect(JSON.stringify(keys2.out)).not.toContain(key.out.apiKey);
});

test('users list is paged, newest first, and a long page reaches a pipe whole', async () => {
  // Its own database: the page is then exactly what this test wrote, whatever other suites did.
  const uri = databaseUri('stupa_admin');
  const own = tempDir();
  fs.writeFileSync(path.join(own, 'stack.json'), JSON.stringify({ endpoints: { mongodbUri: uri } }));
  fs.writeFileSync(path.join(own, 'master.key'), masterKey);
  const db = await openDatabase(uri);
  try {
    // 1,500 users, a millisecond apart, written as `users create` writes them; page order is
    // createdAt then id, newest first.
    const users = Array.from({ length: 1500 }, (_, i) => ({
      _id: `usr_page${String(i).padStart(12, '0')}`,
      email: `u${i}@page.test`,
      name: `U${i}`,
      plan: 'dharma',
      createdAt: 1_700_000_000_000 + i,
      updatedAt: 1_700_000_000_000 + i,
    }));
    await db.users.model.insertMany(users);
    const newestFirst = users.map((u) => u._id).reverse();

    const first = await admin('users', 'list', '--json', { dataDir: own });
    expect(first.out.users.map((u: { userId: string }) => u.userId)).toEqual(newestFirst.slice(0, 50));
    expect(first.out.next).toBe(newestFirst[49]);

    // The largest page (a JSON text of some 150 kB, more than a pipe holds) arrives whole.
    const seen: string[] = [];
    let next: string | null = first.out.next;
    seen.push(...first.out.users.map((u: { userId: string }) => u.userId));
    while (next) {
      const page = await admin('users', 'list', '--limit', '1000', '--after', next, '--json', { dataDir: own });
      expect(page.code).toBe(0);
      seen.push(...page.out.users.map((u: { userId: string }) => u.userId));
      next = page.out.next;
    }
    expect(seen).toEqual(newestFirst);

    const human = await admin('users', 'list', '--limit', '2', { dataDir: own });
    expect(human.out).toBe(
      `userId: ${newestFirst[0]}\nemail: u1499@page.test\nname: U1499\nplan: dharma\ncreatedAt: 1700000001499\n\n` +
        `userId: ${newestFirst[1]}\nemail: u1498@page.test\nname: U1498\nplan: dharma\ncreatedAt: 1700000001498\n\n` +
        `next page: npm run admin -- users list --after ${newestFirst[1]}\n`,
    );
    const last = await admin('users', 'list', '--limit', '2', '--after', newestFirst[1497]!, { dataDir: own });
    expect(last.out).not.toContain('next page');

    for (const limit of ['0', '1001', 'all']) {
      const bad = await admin('users', 'list', '--limit', limit, '--json', { dataDir: own });
      expect({ limit, code: bad.code, reason: bad.out.error.reason }).toEqual({ limit, code: 2, reason: 'INVALID_LIMIT' });
    }
    const gone = await admin('users', 'list', '--after', 'usr_nobody', '--json', { dataDir: own });
    expect(gone.code).toBe(2);
    expect(gone.out.error.details).toMatch(/user usr_nobody \(the page cursor\) not found/);
  } finally {
    await db.connection.dropDatabase().catch(() => undefined);
    await db.close();
  }
});

test('bad usage is exit 2 with a message; unknown plan and user are refused', async () => {
  const unknown = await admin('frobnicate', '--json');
  expect(unknown.code).toBe(2);
  expect(unknown.out.error.reason).toBe('USAGE');
  const plan = await admin('users', 'create', '--email', 'x@y.z', '--name', 'X', '--plan', 'gold', '--json');
  expect(plan.code).toBe(2);
  expect(plan.out.error.details).toMatch(/unknown plan gold; plans: dharma, bodhi/);
  const user = await admin('keys', 'create', '--user', 'usr_nobody', '--json');
  expect(user.code).toBe(2);
  expect(user.out.error.details).toMatch(/user usr_nobody not found/);
  // A key's lifetime has the REST API's range here too: 60 s to 10 years.
  const someone = await admin('users', 'create', '--email', `${crypto.randomUUID()}@example.test`, '--name', 'Y', '--json');
  for (const seconds of ['59', '315360001', 'soon']) {
    const long = await admin('keys', 'create', '--user', someone.out.userId, '--expires-in', seconds, '--json');
    expect({ seconds, code: long.code, reason: long.out.error.reason }).toEqual({ seconds, code: 2, reason: 'INVALID_INPUT' });
  }
  const missing = await admin('users', 'create', '--name', 'X');
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/--email is required/);
});
