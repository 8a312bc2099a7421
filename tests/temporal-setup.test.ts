// Setting up any Temporal for the service (infra/temporal/setup.ts), against the test stack's
// real server: a namespace of its own per test (the dev server does not delete namespaces, so
// each name is new), set up by the library, by the admin CLI and by a worker at start; and the
// clear failures of a Temporal that is not set up, from the check, /readyz and the worker.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import type { ApiServer } from '../api/server.js';
import { TemporalSetupError } from '../infra/errors.js';
import { SEARCH_ATTRIBUTES } from '../infra/temporal/contracts/job.js';
import { checkTemporalSetup, setupTemporal } from '../infra/temporal/setup.js';
import { call, stack, startTestApi, tempDir, testEnv } from './support/stack.js';
import { eventually, startWorkerProcess } from './support/worker.js';

const exec = promisify(execFile);
const DAY_S = 86_400;
const KEYWORD = 2;
const TEXT = 1;
let connection: Connection;

beforeAll(async () => {
  connection = await Connection.connect({ address: stack.temporalAddress });
});
afterAll(() => connection.close());

const freshNamespace = () => `stupa-setup-${Date.now()}-${crypto.randomBytes(3).toString('hex')}`;

const retentionSeconds = async (namespace: string) =>
  Number((await connection.workflowService.describeNamespace({ namespace })).config?.workflowExecutionRetentionTtl?.seconds);

const listed = async (namespace: string) => (await connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};

/** A namespace registered by hand with only `attributes`, as an operator might have left it;
 * resolves once Temporal lists them (a new namespace reaches its services' caches late). */
async function namespaceByHand(attributes: Record<string, number>): Promise<string> {
  const namespace = freshNamespace();
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(2 * DAY_S * 1000) });
  await eventually(
    () =>
      connection.operatorService.addSearchAttributes({ namespace, searchAttributes: attributes }).then(
        () => true,
        () => false,
      ),
    Boolean,
    60_000,
    'search attributes added',
  );
  await eventually(
    () => listed(namespace),
    (types) => Object.keys(attributes).every((name) => types[name] !== undefined),
    60_000,
    'search attributes listed',
  );
  return namespace;
}

test('setup creates a new namespace with the retention asked and every search attribute as Keyword; again, it changes nothing', async () => {
  const namespace = freshNamespace();
  expect(await setupTemporal(connection, { namespace, retentionDays: 3 })).toEqual({
    namespaceCreated: true,
    searchAttributesAdded: [...SEARCH_ATTRIBUTES],
  });
  expect(await retentionSeconds(namespace)).toBe(3 * DAY_S);
  const types = await listed(namespace);
  for (const name of SEARCH_ATTRIBUTES) expect([name, Number(types[name])]).toEqual([name, KEYWORD]);
  await checkTemporalSetup(connection, namespace);

  // Another retention asked of a namespace that exists is not applied: it is left as it is.
  expect(await setupTemporal(connection, { namespace, retentionDays: 9 })).toEqual({ namespaceCreated: false, searchAttributesAdded: [] });
  expect(await retentionSeconds(namespace)).toBe(3 * DAY_S);
}, 120_000);

test('the check names a namespace that does not exist, and the way out', async () => {
  const namespace = freshNamespace();
  const failure = checkTemporalSetup(connection, namespace);
  await expect(failure).rejects.toThrow(TemporalSetupError);
  await expect(failure).rejects.toThrow(
    `namespace "${namespace}" does not exist on ${stack.temporalAddress}: run npm run admin -- temporal setup`,
  );
});

test('a namespace set up by hand without one search attribute: the check names it, and setup adds only that one', async () => {
  const partial = Object.fromEntries(SEARCH_ATTRIBUTES.filter((name) => name !== 'FolderId').map((name) => [name, KEYWORD]));
  const namespace = await namespaceByHand(partial);
  await expect(checkTemporalSetup(connection, namespace)).rejects.toThrow(
    `search attribute FolderId is missing in namespace "${namespace}" on ${stack.temporalAddress}: run npm run admin -- temporal setup`,
  );
  expect(await setupTemporal(connection, { namespace, retentionDays: 7 })).toEqual({
    namespaceCreated: false,
    searchAttributesAdded: ['FolderId'],
  });
  await checkTemporalSetup(connection, namespace);
  expect(await retentionSeconds(namespace)).toBe(2 * DAY_S);
}, 150_000);

test('a search attribute of another type is an error naming it, which setup does not paper over', async () => {
  const namespace = await namespaceByHand({ Cid: TEXT });
  const wrong = new RegExp(`^search attribute Cid in namespace "${namespace}" on .* is of type Text, not Keyword`);
  await expect(checkTemporalSetup(connection, namespace)).rejects.toThrow(wrong);
  await expect(setupTemporal(connection, { namespace, retentionDays: 7 })).rejects.toThrow(wrong);
}, 150_000);

/** The admin CLI as an operator runs it against a Temporal of their own. */
async function admin(namespace: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec('npx', ['tsx', 'api/cli/admin.ts', ...args], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: tempDir(),
        TEMPORAL_ADDRESS: stack.temporalAddress,
        TEMPORAL_NAMESPACE: namespace,
      },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('admin: temporal check fails saying what to do, temporal setup sets up, and says so when there is nothing to do', async () => {
  const namespace = freshNamespace();
  const missing = await admin(namespace, 'temporal', 'check');
  expect(missing.code).toBe(1);
  expect(missing.stderr).toBe(
    `stupa admin: namespace "${namespace}" does not exist on ${stack.temporalAddress}: run npm run admin -- temporal setup\n`,
  );
  const missingJson = await admin(namespace, 'temporal', 'check', '--json');
  expect(JSON.parse(missingJson.stdout).error.reason).toBe('TEMPORAL_SETUP');

  const setup = await admin(namespace, 'temporal', 'setup');
  expect(setup.code).toBe(0);
  expect(setup.stdout).toMatch(new RegExp(`^created namespace ${namespace} on \\S+ \\(retention 7 days\\)\\n`));
  expect(setup.stdout).toContain(`added search attributes ${SEARCH_ATTRIBUTES.join(', ')} (Keyword)`);
  expect(await retentionSeconds(namespace)).toBe(7 * DAY_S);

  const check = await admin(namespace, 'temporal', 'check');
  expect(check.code).toBe(0);
  expect(check.stdout).toBe(
    `set up: namespace ${namespace} on ${stack.temporalAddress}, search attributes ${SEARCH_ATTRIBUTES.join(', ')}\n`,
  );

  const again = await admin(namespace, 'temporal', 'setup');
  expect(again.code).toBe(0);
  expect(again.stdout).toBe(
    `already set up: namespace ${namespace} (retention 7 days), search attributes ${SEARCH_ATTRIBUTES.join(', ')}\n`,
  );
  const againJson = await admin(namespace, 'temporal', 'setup', '--json');
  expect(JSON.parse(againJson.stdout)).toEqual({
    address: stack.temporalAddress,
    namespace,
    searchAttributes: [...SEARCH_ATTRIBUTES],
    setup: { namespaceCreated: false, searchAttributesAdded: [], retentionDays: 7 },
  });
}, 120_000);

test('/readyz fails on temporal with the check message until the namespace is set up', async () => {
  const namespace = freshNamespace();
  let api: ApiServer | undefined;
  try {
    api = await startTestApi({ TEMPORAL_NAMESPACE: namespace });
    const down = await call(api, 'GET', '/readyz');
    expect(down.status).toBe(503);
    expect(down.body.checks.temporal).toBe(
      `unreachable: namespace "${namespace}" does not exist on ${stack.temporalAddress}: run npm run admin -- temporal setup`,
    );
    await setupTemporal(connection, { namespace, retentionDays: 1 });
    // A failed check is not remembered: the next probe sees the setup.
    const up = await call(api, 'GET', '/readyz');
    expect(up.body.checks.temporal).toBe('ok');
    expect(up.status).toBe(200);
  } finally {
    await api?.close();
  }
}, 120_000);

test('a worker with TEMPORAL_SETUP=off stops with the check message alone; with auto it sets up its namespace and polls', async () => {
  const namespace = freshNamespace();
  const env = { ...testEnv({ TEMPORAL_NAMESPACE: namespace }), PATH: process.env.PATH, HOME: process.env.HOME };
  const off = await exec(process.execPath, ['--import', 'tsx', 'workers/main.ts'], { env: { ...env, TEMPORAL_SETUP: 'off' } }).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code: number; stderr: string }) => err,
  );
  expect(off.code).toBe(1);
  expect(off.stderr).toBe(
    `stupa-worker: namespace "${namespace}" does not exist on ${stack.temporalAddress}: run npm run admin -- temporal setup\n`,
  );

  // Resolves once the worker polls its task queue in the namespace it set up.
  const worker = await startWorkerProcess({ TEMPORAL_NAMESPACE: namespace });
  try {
    await checkTemporalSetup(connection, namespace);
    expect(await retentionSeconds(namespace)).toBe(7 * DAY_S);
  } finally {
    await worker.kill();
  }
}, 180_000);
