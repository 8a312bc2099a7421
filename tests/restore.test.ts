// The restore drill (docs/operations/upgrades-and-backups.md): a stack of its own takes writes,
// is backed up while they go on (`npm run admin -- backup DIR`), goes on writing, and is then
// wiped. The backup is restored into a new data directory (`restore DIR`) and started on new
// ports. What was acknowledged before the backup is all there, with the same bytes through the
// REST API, the gateway and S3; its IPNS name takes a new publish; a pin that waited for its
// content at backup time resumes and completes; and the content pinned after the database's
// snapshot, which no restored record holds, is found by the audit and kept, never unpinned.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { GetObjectCommand, PutObjectCommand, CreateBucketCommand } from '@aws-sdk/client-s3';
import type { ApiServer } from '../api/server.js';
import { createClusterClient } from '../infra/ipfs/cluster.js';
import { createKubo } from '../infra/ipfs/kubo.js';
import { readIpnsRecord } from '../infra/ipfs/ipns.js';
import type { AuditReport } from '../infra/temporal/contracts/audit.js';
import type { BackupManifest } from '../stack/backup.js';
import { startStack, type Stack } from '../stack/stack.js';
import { hostRequest } from './support/host-request.js';
import { s3Client } from './support/s3.js';
import { call, createUser, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, type WorkerProcess } from './support/worker.js';

const exec = promisify(execFile);
const MASTER_KEY = crypto.randomBytes(32).toString('hex');

/** A service's environment on a stack of this file's. */
function envFor(stack: Stack, dataDir: string) {
  const e = stack.endpoints;
  return {
    MONGODB_URI: e.mongodbUri,
    TEMPORAL_ADDRESS: e.temporalAddress,
    KUBO_API_URL: e.kuboApiUrl,
    KUBO_GATEWAY_URL: e.kuboGatewayUrl!,
    CLUSTER_API_URL: e.clusterApiUrl,
    MASTER_KEY,
    DATA_DIR: dataDir,
    TEMPORAL_TASK_QUEUE: 'stupa',
  };
}

interface Running {
  stack: Stack;
  api: ApiServer;
  worker: WorkerProcess;
  env: ReturnType<typeof envFor>;
}

async function startAll(dataDir: string): Promise<Running> {
  const stack = await startStack({ dataDir, ports: 'free', ui: false });
  const env = envFor(stack, dataDir);
  const [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  return { stack, api, worker, env };
}

async function stopAll(r: Running | undefined): Promise<void> {
  if (!r) return;
  await Promise.all([r.api.close(), r.worker.kill()]);
  await r.stack.stop();
}

/** `npm run admin -- <args> --json` as an operator runs it, against the data directory in `env`. */
async function admin(env: Record<string, string>, ...args: string[]): Promise<any> {
  const { stdout } = await exec(process.execPath, ['--import', 'tsx', 'api/cli/admin.ts', ...args, '--json'], {
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  }).catch((err: { stdout?: string; stderr?: string; code?: number }) => {
    // The audit exits 1 when it finds anything: its report is still the answer.
    if (args[0] === 'check' && err.code === 1 && err.stdout) return { stdout: err.stdout };
    throw new Error(`admin ${args.join(' ')} failed: ${err.stderr ?? ''}`);
  });
  return JSON.parse(stdout);
}

interface Written {
  cid: string;
  content: string;
  ackedAt: number;
}

const dirs = {
  first: tempDir('stupa-drill-a-'),
  backup: path.join(tempDir('stupa-drill-b-'), 'backup'),
  restored: tempDir('stupa-drill-c-'),
};
let first: Running | undefined;
let second: Running | undefined;

afterAll(async () => {
  await stopAll(first).catch(() => undefined);
  await stopAll(second).catch(() => undefined);
  for (const dir of Object.values(dirs)) fs.rmSync(dir, { recursive: true, force: true });
});

test('a backup taken under load restores into a wiped stack: bytes, names and jobs are back, later pins are kept', async () => {
  first = await startAll(dirs.first);
  const user: TestUser = await createUser(first.api, 'karma');
  const slug = (await first.api.deps.db.users.get(user.userId))!.gatewaySlug!;

  // Before the backup: files, an S3 object, an IPNS name, and a pin waiting for content nobody has yet.
  const before: Written[] = [];
  for (let i = 0; i < 10; i++) {
    const content = `before the backup ${i} ${crypto.randomUUID()}`;
    const res = await call(first.api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: `b${i}.txt` } });
    expect(res.status).toBe(201);
    before.push({ cid: res.body.cid, content, ackedAt: Date.now() });
  }
  const s3 = s3Client(first.api, user);
  const bucket = `drill-${crypto.randomBytes(4).toString('hex')}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const objectBody = crypto.randomBytes(300_000);
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'kept/object.bin', Body: objectBody }));
  s3.destroy();
  const { ipnsName } = (await call(first.api, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: 'drill' } })).body;
  expect(
    (await call(first.api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid: before[0]!.cid } })).body,
  ).toMatchObject({ sequence: 1 });
  const awaited = `content that arrives after the restore ${crypto.randomUUID()}`;
  const awaitedCid = (
    await createKubo(first.env.KUBO_API_URL).add(awaited, { onlyHash: true, cidVersion: 1, rawLeaves: true })
  ).cid.toString();
  const waiting = await call(first.api, 'POST', '/psa/pins', { key: user.apiKey, body: { cid: awaitedCid, name: 'awaited' } });
  expect(waiting.status).toBe(202);

  // Writes go on, four at a time, through the backup and for a while after it.
  const during: Written[] = [];
  let writing = true;
  const loaders = Array.from({ length: 4 }, async (_, n) => {
    for (let i = 0; writing; i++) {
      const content = `under load ${n}.${i} ${crypto.randomUUID()}`;
      const res = await call(first!.api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name: `l${n}-${i}.txt` } });
      if (res.status !== 201) throw new Error(`upload answered ${res.status}: ${res.text}`);
      during.push({ cid: res.body.cid, content, ackedAt: Date.now() });
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const manifest = (await admin(first.env, 'backup', dirs.backup)) as BackupManifest;
  await new Promise((r) => setTimeout(r, 500));
  writing = false;
  await Promise.all(loaders);

  const takenAt = Date.parse(manifest.takenAt);
  expect(manifest.masterKeySha256).toMatch(/^[0-9a-f]{16}$/);
  expect(fs.readdirSync(dirs.backup)).not.toContain('master.key');
  expect(JSON.stringify(manifest)).not.toContain(MASTER_KEY);
  expect(manifest.counts.files).toBeGreaterThanOrEqual(before.length);
  expect(manifest.stores.cluster.pins).toBeGreaterThanOrEqual(before.length);
  const backedUpPins = new Set(
    fs
      .readFileSync(path.join(dirs.backup, 'cluster-pinset.ndjson'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => (JSON.parse(l) as { cid: string }).cid),
  );

  // The stack is gone: processes stopped, data directory wiped.
  await stopAll(first);
  first = undefined;
  fs.rmSync(dirs.first, { recursive: true, force: true });

  // Restore refuses without the master key, then restores with it.
  const restoreEnv = { DATA_DIR: dirs.restored };
  await expect(admin(restoreEnv, 'restore', dirs.backup)).rejects.toThrow(/master key/);
  fs.writeFileSync(path.join(dirs.restored, 'master.key'), MASTER_KEY);
  const restored = await admin(restoreEnv, 'restore', dirs.backup);
  expect(restored.manifest.takenAt).toBe(manifest.takenAt);
  second = await startAll(dirs.restored);
  const api = second.api;
  // Kubo counted the restored blocks at its start (restore drops the size `ipfs init` wrote).
  const repo = (await (await fetch(new URL('/api/v0/repo/stat?size-only=true', second.env.KUBO_API_URL), { method: 'POST' })).json()) as {
    RepoSize: number;
  };
  expect(repo.RepoSize).toBeGreaterThanOrEqual(manifest.stores.blocks.bytes);

  // Everything acknowledged before the backup began is there, byte for byte.
  const acknowledged = [...before, ...during.filter((w) => w.ackedAt < takenAt)];
  const gatewayPort = new URL(api.gatewayUrl).port;
  for (const w of acknowledged) {
    const file = await call(api, 'GET', `/files/${w.cid}`, { key: user.apiKey });
    expect(file.status).toBe(200);
    expect(file.body.cid).toBe(w.cid);
    const read = await hostRequest(gatewayPort, `${slug}.localhost:${gatewayPort}`, `/ipfs/${w.cid}`);
    expect(read.status).toBe(200);
    expect(read.body.toString()).toBe(w.content);
  }
  const s3Again = s3Client(api, user);
  const object = await s3Again.send(new GetObjectCommand({ Bucket: bucket, Key: 'kept/object.bin' }));
  expect(Buffer.from(await object.Body!.transformToByteArray()).equals(objectBody)).toBe(true);
  s3Again.destroy();

  // The IPNS name takes its next publish (sequence 2) and Kubo serves the record.
  const next = await call(api, 'POST', '/ipns/publish', { key: user.apiKey, body: { ipnsName, cid: before[1]!.cid } });
  expect(next.body).toMatchObject({ sequence: 2, published: true });
  const res = await fetch(new URL(`/api/v0/routing/get?arg=/ipns/${ipnsName}`, second.env.KUBO_API_URL), { method: 'POST' });
  const extra = (JSON.parse((await res.text()).trim().split('\n').pop()!) as { Extra: string }).Extra;
  expect(readIpnsRecord(Buffer.from(extra, 'base64')).value).toBe(`/ipfs/${before[1]!.cid}`);

  // The pin that waited at backup time is still waiting, and completes once its content arrives.
  const requestid = waiting.body.requestid as string;
  expect(['queued', 'pinning']).toContain((await call(api, 'GET', `/psa/pins/${requestid}`, { key: user.apiKey })).body.status);
  await createKubo(second.env.KUBO_API_URL).add(awaited, { cidVersion: 1, rawLeaves: true });
  await eventually(
    async () => (await call(api, 'GET', `/psa/pins/${requestid}`, { key: user.apiKey })).body.status,
    (status) => status === 'pinned',
    60_000,
  );

  // Content pinned after the database's snapshot has no record now: the audit finds it and keeps it.
  const recorded = async (cid: string) => (await call(api, 'GET', `/files/${cid}`, { key: user.apiKey })).status === 200;
  const orphans: string[] = [];
  for (const w of during.filter((d) => d.ackedAt >= takenAt && backedUpPins.has(d.cid))) if (!(await recorded(w.cid))) orphans.push(w.cid);
  expect(orphans.length).toBeGreaterThan(0);
  const report = (await admin(second.env, 'check', '--repair')) as AuditReport;
  const kept = report.disagreements.filter((d) => d.kind === 'pinned-after-backup').map((d) => d.subject);
  expect(kept.sort()).toEqual([...orphans].sort());
  expect(report.disagreements.filter((d) => d.kind === 'pinned-not-held')).toEqual([]);
  const cluster = createClusterClient(second.env.CLUSTER_API_URL);
  for (const cid of orphans) {
    expect(await cluster.allocation(cid)).not.toBeNull();
    const read = await createKubo(second.env.KUBO_API_URL).cat(cid);
    expect(Buffer.from(await collectAll(read)).toString()).toBe(during.find((d) => d.cid === cid)!.content);
  }
  // After the repair Kubo pins again what Cluster's restored pin set holds.
  await eventually(
    async () => (await cluster.status(acknowledged[0]!.cid)).peer_map,
    (peers) => Object.values(peers).every((p) => p.status === 'pinned'),
    60_000,
  );
  console.log(
    `restore drill: ${acknowledged.length} acknowledged before the backup, ${during.length + before.length - acknowledged.length} after it began, ` +
      `${orphans.length} pinned after the snapshot and kept; backup ${manifest.stores.mongodb.ms + manifest.stores.temporal.ms + manifest.stores.cluster.ms + manifest.stores.blocks.ms} ms, ` +
      `restore ${restored.seconds} s`,
  );
}, 600_000);

async function collectAll(source: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of source) parts.push(part);
  return Buffer.concat(parts);
}
