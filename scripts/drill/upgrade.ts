// `npm run drill:upgrade [-- --from REF]`: a rolling upgrade with jobs in flight
// (docs/operations/upgrades-and-backups.md). REF (default HEAD~1) is checked out into a git
// worktree and its API and worker run on a stack of their own, behind the edge. Long jobs are
// started on it (a pin waiting for its content, an IPNS name's republish schedule, a multipart
// upload between its parts, a webhook whose endpoint fails) while a steady load goes through
// the edge. Then this checkout's API and worker start beside the old ones, and the old ones are
// stopped. Every job must complete on the new version, and no request may fail: no 5xx, no
// refused connection. Exit 0 when all hold, 1 otherwise, with the numbers either way.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Connection } from '@temporalio/client';
import { defaultBuildId } from '../../infra/build-id.js';
import { DEFAULT_TEMPORAL_NAMESPACE, DEFAULT_WORKER_DEPLOYMENT } from '../../infra/constants.js';
import { projectRoot } from '../../infra/paths.js';
import { describeDeployment } from '../../infra/temporal/versioning.js';
import { startEdge } from '../../stack/edge.js';
import { freePorts } from '../../stack/ports.js';
import type { ManagedProcess } from '../../stack/process.js';
import { startApiProcess, startWorkerProcess } from '../../stack/services.js';
import { startStack } from '../../stack/stack.js';
import { flakyEndpoint, startJobs, startLoad, type Account } from './jobs.js';

const { values } = parseArgs({ options: { from: { type: 'string', default: 'HEAD~1' }, keep: { type: 'boolean' } } });
const say = (line: string) => process.stdout.write(`[drill] ${line}\n`);
const git = (...args: string[]) => execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8' }).trim();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-upgrade-'));
const oldRoot = path.join(work, 'old');
const dataDir = path.join(work, 'data');
const logDir = path.join(dataDir, 'logs');
const cleanups: (() => Promise<unknown>)[] = [];

/** The old checkout's dependencies: this checkout's when the lock files are the same, else its own `npm ci`. */
function prepareOld(ref: string): string {
  const commit = git('rev-parse', '--short', ref);
  git('worktree', 'add', '--detach', oldRoot, ref);
  cleanups.push(async () => git('worktree', 'remove', '--force', oldRoot));
  const lock = (root: string) => fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8');
  if (lock(oldRoot) === lock(projectRoot)) fs.symlinkSync(path.join(projectRoot, 'node_modules'), path.join(oldRoot, 'node_modules'));
  else {
    say(`${commit}'s package-lock.json differs: npm ci in its worktree`);
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: oldRoot, stdio: 'inherit' });
  }
  return commit;
}

async function main(): Promise<number> {
  const from = prepareOld(values.from!);
  const to = git('rev-parse', '--short', 'HEAD');
  say(
    `from ${from} (${values.from}) to ${to} (this checkout${git('status', '--porcelain') ? ', with uncommitted changes' : ''}); in ${work}`,
  );

  fs.mkdirSync(dataDir, { recursive: true });
  const masterKey = crypto.randomBytes(32).toString('hex');
  fs.writeFileSync(path.join(dataDir, 'master.key'), masterKey);
  const stack = await startStack({ dataDir, ports: 'free', ui: false });
  cleanups.push(() => stack.stop());
  const e = stack.endpoints;
  const [edgeApi, edgeGateway, edgeS3, ...apiPorts] = (await freePorts(9)) as number[];
  const secret = crypto.randomBytes(32).toString('hex');
  const urls = { api: `http://127.0.0.1:${edgeApi}`, gateway: `http://localhost:${edgeGateway}`, s3: `http://127.0.0.1:${edgeS3}` };
  // Two API slots, old and new, on ports fixed from the start: the edge has both as upstreams,
  // and passes over the one not answering (its dials fail; its health checks mark it down).
  const slots = [apiPorts.slice(0, 3), apiPorts.slice(3, 6)] as [[number, number, number], [number, number, number]];
  const edge = await startEdge({
    dataDir,
    host: '127.0.0.1',
    ports: { api: edgeApi!, gateway: edgeGateway!, s3: edgeS3! },
    apis: slots.map(([api, gateway, s3]) => ({ api: `127.0.0.1:${api}`, gateway: `127.0.0.1:${gateway}`, s3: `127.0.0.1:${s3}` })),
    kuboGateways: [new URL(e.kuboGatewayUrl!).host],
    secret,
    reports: null,
  });
  cleanups.push(() => edge.stop());

  const env = (slot: [number, number, number]) => ({
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k === 'PATH' || k === 'HOME')),
    MONGODB_URI: e.mongodbUri,
    TEMPORAL_ADDRESS: e.temporalAddress,
    KUBO_API_URL: e.kuboApiUrl,
    KUBO_GATEWAY_URL: e.kuboGatewayUrl,
    CLUSTER_API_URL: e.clusterApiUrl,
    DATA_DIR: dataDir,
    MASTER_KEY: masterKey,
    EDGE_SECRET: secret,
    PUBLIC_URL: urls.api,
    GATEWAY_PUBLIC_URL: urls.gateway,
    S3_PUBLIC_URL: urls.s3,
    API_HOST: '127.0.0.1',
    API_PORT: String(slot[0]),
    GATEWAY_PORT: String(slot[1]),
    S3_PORT: String(slot[2]),
    IPNS_REPUBLISH_INTERVAL: '5s',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    // Retries after 0.02, 1.4, 8, 33 and 83 s (the 3-day schedule scaled): some before the switch, one after.
    WEBHOOK_RETRY_PERIOD: '20m',
    LOG_LEVEL: 'warn',
  });
  const started: Record<string, ManagedProcess> = {};
  const start = async (version: 'old' | 'new', slot: [number, number, number]) => {
    const root = version === 'old' ? oldRoot : projectRoot;
    const t = Date.now();
    const [api, worker] = await Promise.all([
      startApiProcess(env(slot), { logDir, name: `api-${version}`, root, track: (stop) => cleanups.push(stop) }),
      startWorkerProcess(env(slot), { logDir, name: `worker-${version}`, root, track: (stop) => cleanups.push(stop) }),
    ]);
    started[`api-${version}`] = api;
    started[`worker-${version}`] = worker;
    say(`${version} API and worker ready (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  };
  await start('old', slots[0]);
  // Until the edge's health check has seen the old API ready, it answers 503.
  for (
    let t = Date.now();
    (await fetch(`${urls.api}/healthz`).then(
      (r) => r.status,
      () => 0,
    )) !== 200;
  ) {
    if (Date.now() - t > 30_000) throw new Error('the edge never reached the old API');
    await sleep(250);
  }

  const created = execFileSync(
    process.execPath,
    [
      '--import',
      'tsx',
      'api/cli/admin.ts',
      'users',
      'create',
      '--email',
      `drill-${crypto.randomUUID()}@example.test`,
      '--name',
      'Drill',
      '--plan',
      'nirvana', // 6,000 requests a minute: the load stays under it
      '--json',
    ],
    { cwd: oldRoot, env: env(slots[0]), encoding: 'utf8' },
  );
  const account = JSON.parse(created) as Account;
  const hook = await flakyEndpoint();
  cleanups.push(() => hook.close());
  const load = startLoad(urls, account);
  const finish = await startJobs(urls, account, e.kuboApiUrl, hook);
  say('jobs in flight on the old version: a pin waiting for content, an IPNS republish schedule, a multipart upload, a failing webhook');
  await sleep(3000);

  const switchStart = Date.now();
  await start('new', slots[1]);
  // The documented order: the new process ready, and seen so by the edge's health checks (every
  // 2 s), before the old one stops.
  for (
    let t = Date.now();
    (await fetch(`http://127.0.0.1:${slots[1][0]}/readyz`).then(
      (r) => r.status,
      () => 0,
    )) !== 200;
  ) {
    if (Date.now() - t > 30_000) throw new Error('the new API never became ready');
    await sleep(250);
  }
  await sleep(4500);
  await Promise.all([started['api-old']!.stop(), started['worker-old']!.stop()]);
  const switchMs = Date.now() - switchStart;
  say(`old API and worker stopped; the switch took ${(switchMs / 1000).toFixed(1)} s`);
  await sleep(3000);

  // The new build took over in Temporal (the old one, if versioned, drains).
  const connection = await Connection.connect({ address: e.temporalAddress });
  const deployment = await describeDeployment(connection, e.temporalNamespace ?? DEFAULT_TEMPORAL_NAMESPACE, DEFAULT_WORKER_DEPLOYMENT);
  await connection.close();
  const builds = (deployment?.versions ?? []).map((v) => `${v.buildId} ${v.drainage}`).join(', ');
  say(`worker deployment: current ${deployment?.current ?? 'none'}; builds: ${builds || 'none'}`);
  const tookOver = deployment?.current === defaultBuildId(projectRoot);

  const results = await finish();
  const counts = await load.stop();
  for (const [job, r] of Object.entries(results))
    say(`${r.ok ? 'ok  ' : 'FAIL'} ${job}: ${r.detail} (${r.ms} ms to complete after the switch)`);
  say(
    `load: ${counts.requests} requests, ${counts.ok} answered 2xx, ${counts.status4xx} 4xx, ${counts.status5xx} 5xx, ${counts.refused} failed to connect`,
  );
  for (const error of counts.errors.slice(0, 10)) say(`  ${error}`);
  if (!tookOver) say(`FAIL the current build is not this checkout's (${defaultBuildId(projectRoot)})`);
  const ok =
    tookOver && Object.values(results).every((r) => r.ok) && counts.status5xx === 0 && counts.refused === 0 && counts.status4xx === 0;
  say(ok ? 'upgrade drill passed' : `upgrade drill FAILED (logs in ${logDir})`);
  return ok ? 0 : 1;
}

async function cleanup(keep: boolean): Promise<void> {
  for (const step of cleanups.reverse()) await step().catch(() => undefined);
  if (!keep) fs.rmSync(work, { recursive: true, force: true });
}

main().then(
  async (code) => {
    await cleanup(values.keep === true || code !== 0);
    process.exit(code);
  },
  async (err: unknown) => {
    say(`drill stopped: ${err instanceof Error ? err.stack : String(err)}`);
    await cleanup(true);
    process.exit(1);
  },
);
