// Worker Deployment Versioning (infra/temporal/versioning.ts): a worker polls as its build and
// makes it current; a second build started with WORKER_PROMOTE=manual takes nothing until an
// operator promotes it (`npm run admin -- temporal promote`); then a running workflow that moves
// with upgrades (an IPNS name's) continues on the new build at its next task, and new workflows
// start there. A deployment name and task queue of this file's own: promoting a build here must
// not move the other files' workflows.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import type { ApiServer } from '../api/server.js';
import { describeDeployment } from '../infra/temporal/versioning.js';
import { call, createUser, startTestApi, testEnv } from './support/stack.js';
import { eventually, startWorkerProcess, type WorkerProcess } from './support/worker.js';

const exec = promisify(execFile);
const suffix = crypto.randomBytes(4).toString('hex');
const env = {
  TEMPORAL_TASK_QUEUE: `stupa-versions-${suffix}`,
  WORKER_DEPLOYMENT_NAME: `stupa-versions-${suffix}`,
  IPNS_REPUBLISH_INTERVAL: '2s',
  MASTER_KEY: crypto.randomBytes(32).toString('hex'),
};
let api: ApiServer;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  api = await startTestApi(env);
});
afterAll(async () => {
  await Promise.all([api?.close(), ...workers.map((w) => w.kill())]);
});

const current = async () =>
  (await describeDeployment(api.deps.temporal.connection, api.deps.config.temporal.namespace, env.WORKER_DEPLOYMENT_NAME))?.current ?? null;

/** The build a workflow runs on and its versioning behaviour, as Temporal records them. */
async function versionOf(workflowId: string) {
  const { raw } = await api.deps.temporal.client.workflow.getHandle(workflowId).describe();
  const info = raw.workflowExecutionInfo?.versioningInfo;
  return { buildId: info?.deploymentVersion?.buildId ?? null, behavior: info?.behavior ?? null };
}

async function admin(...args: string[]): Promise<any> {
  const { stdout } = await exec(process.execPath, ['--import', 'tsx', 'api/cli/admin.ts', ...args, '--json'], {
    env: { ...process.env, ...testEnv({ ...env, WORKER_BUILD_ID: 'build-b' }) } as NodeJS.ProcessEnv,
  });
  return JSON.parse(stdout);
}

test('a new build takes over at its promotion: running workflows move at their next task, new ones start on it', async () => {
  workers.push(await startWorkerProcess({ ...env, WORKER_BUILD_ID: 'build-a' }));
  await eventually(current, (c) => c === 'build-a', 30_000, 'build-a made current by its worker');

  const user = await createUser(api, 'karma');
  const name = async (label: string) => {
    const { ipnsName } = (await call(api, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: label } })).body;
    const cid = (
      await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `${label} ${suffix}`, name: `${label}.txt` } })
    ).body.cid;
    expect((await call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid } })).status).toBe(200);
    return `ipns:${ipnsName}`;
  };
  const first = await name('first');
  await eventually(
    () => versionOf(first),
    (v) => v.buildId === 'build-a',
    30_000,
    'the name workflow on build-a',
  );
  // AUTO_UPGRADE = 2 (temporal.api.enums.v1.VersioningBehavior), as workflows/ipns.ts declares.
  expect((await versionOf(first)).behavior).toBe(2);

  // build-b polls, but takes nothing until it is promoted.
  workers.push(await startWorkerProcess({ ...env, WORKER_BUILD_ID: 'build-b', WORKER_PROMOTE: 'manual' }));
  await new Promise((r) => setTimeout(r, 5000)); // two republishes
  expect(await current()).toBe('build-a');
  expect((await versionOf(first)).buildId).toBe('build-a');
  const listed = await admin('temporal', 'versions');
  expect(listed.current).toBe('build-a');
  expect(listed.versions.map((v: { buildId: string }) => v.buildId).sort()).toEqual(['build-a', 'build-b']);

  const promoted = await admin('temporal', 'promote');
  expect(promoted.promoted).toEqual({ buildId: 'build-b', previous: 'build-a', changed: true });
  expect(promoted.current).toBe('build-b');
  // The running workflow moves at its next task (a republish every 2 s); a new one starts on b.
  await eventually(
    () => versionOf(first),
    (v) => v.buildId === 'build-b',
    30_000,
    'the name workflow moved to build-b',
  );
  const second = await name('second');
  await eventually(
    () => versionOf(second),
    (v) => v.buildId === 'build-b',
    30_000,
    'a new name workflow on build-b',
  );
  expect((await admin('temporal', 'promote')).promoted.changed).toBe(false);
}, 180_000);
