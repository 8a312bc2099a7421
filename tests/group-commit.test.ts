// Small writes are group-committed (infra/db/batch.ts): requests that arrive together share
// their database commands. The guarantees stay those of one command each, with several API
// processes on one database: here an API in this process (A) and `npm run api`'s own process
// (B, C), each with its own connection, batches and memory.
// - The quota is exact under a burst split across processes, and so is a counted limit (IPNS
//   publishes a month), whose takes share their updates.
// - A key deleted through one process is refused by another on its next request; a key's rate
//   limit counts its requests in every process; gateway bytes are metered once.
// - An API process killed with SIGKILL in the middle of its batches loses no acknowledged
//   upload, and the service's own recovery (the worker's scheduled sweep, no operator step)
//   leaves the counters equal to a recount.
import http from 'node:http';
import type { ApiServer } from '../api/server.js';
import { gatewayBytesThisMonth } from '../core/bandwidth.js';
import { publishesKey } from '../core/ipns.js';
import { RATE_WINDOW_MS } from '../infra/constants.js';
import { STAMPS_KEPT } from '../infra/db/ipns-names.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { startApiProcess } from '../stack/services.js';
import type { ManagedProcess } from '../stack/process.js';
import { freePorts } from '../stack/ports.js';
import { loadConfig } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { startApiServer } from '../api/server.js';
import { call, createUser, plansFile, tempDir, testEnv, type TestUser } from './support/stack.js';
import { cluster, collect, kubo } from './support/content.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

const MB = 1024 * 1024;
const env = testEnv({
  TEMPORAL_TASK_QUEUE: testTaskQueue(),
  PLANS_FILE: plansFile({
    small: { storageMB: 1, requestsPerMinute: 100_000 },
    dharma: { requestsPerMinute: 100_000 },
    limited: { requestsPerMinute: 20 },
    publisher: { ipnsNames: 2, ipnsPublishesPerMonth: 40, requestsPerMinute: 100_000 },
  }),
});

let a: ApiServer;
let worker: WorkerProcess;
const processes: ManagedProcess[] = [];

/** `npm run api` as its own process, on the same database and settings as A. */
async function apiProcess(name: string): Promise<{ url: string; gatewayPort: number; process: ManagedProcess }> {
  const [port, gatewayPort] = await freePorts(2);
  const child = await startApiProcess(
    { ...env, API_PORT: String(port), GATEWAY_PORT: String(gatewayPort) },
    { logDir: tempDir('stupa-api-'), name },
  );
  processes.push(child);
  return { url: `http://127.0.0.1:${port}`, gatewayPort: gatewayPort!, process: child };
}

beforeAll(async () => {
  [a, worker] = await Promise.all([
    startApiServer(loadConfig(env), createLogger(process.env.DEBUG_LOG ?? 'silent')),
    startWorkerProcess(env),
  ]);
});
afterAll(async () => {
  await Promise.all([a?.close(), worker?.kill(), ...processes.map((p) => p.stop())]);
});

const upload = (api: ApiServer | string, user: TestUser, content: string, name: string) =>
  call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content, name } });

/** 1 KiB of text, distinct per label and index. */
const kib = (label: string, i: number) => `${label} ${i} `.padEnd(1024, '.');

/** The counters agree with the records: what `npm run admin -- usage recount` would leave. */
async function countersAgree(userId: string) {
  const compared = await a.deps.db.usage.compare(userId);
  return {
    agree: compared !== null && compared.holdingsOff === 0 && JSON.stringify(compared.stored) === JSON.stringify(compared.fromRecords),
    compared,
  };
}

test('500 concurrent 1 KiB uploads over two API processes, at a quota that fits 250: exactly 250 stored, pinned, counted', async () => {
  const b = await apiProcess('api-b');
  const user = await createUser(a, 'small'); // 1 MiB
  // Fill the account so that exactly 250 KiB are left.
  const filler = 'f'.repeat(MB - 250 * 1024);
  expect((await upload(a, user, filler, 'filler')).status).toBe(201);

  const replies = await Promise.all(
    Array.from({ length: 500 }, (_, i) => upload(i % 2 === 0 ? a : b.url, user, kib('burst', i), `burst-${i}`)),
  );
  // Counted by outcome, so that a failure shows every answer that was not one of the two.
  const outcomes: Record<string, number> = {};
  for (const r of replies) {
    const outcome = r.status === 201 ? '201' : `${r.status} ${r.body?.error?.reason ?? r.text.slice(0, 200)}`;
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }
  expect(outcomes).toEqual({ '201': 250, '402 STORAGE_LIMIT': 250 });
  const stored = replies.filter((r) => r.status === 201);
  // Exactly 250 over two processes is the proof that the quota is counted across them (each
  // alone would take up to 250). Which process got which outcome is the scheduler's: on a loaded
  // machine one process may take all 250 before the other answers (seen in CI), so it is not
  // asserted.

  const { db } = a.deps;
  expect(await db.files.model.countDocuments({ userId: user.userId })).toBe(251);
  expect(await db.usage.used(user.userId)).toBe(MB);
  expect((await countersAgree(user.userId)).agree).toBe(true);
  // Every acknowledged upload is its bytes in Kubo and pinned in Cluster (the answer waited for it).
  const pins = cluster();
  for (const r of stored) {
    expect(await pins.allocation(r.body.cid)).not.toBeNull();
    const index = Number(String(r.body.name).slice('burst-'.length));
    expect((await collect(kubo().cat(r.body.cid))).toString()).toBe(kib('burst', index));
  }
}, 300_000);

test('100 concurrent IPNS publishes over two API processes at a limit of 40 a month: exactly 40 published, takes that came together one update', async () => {
  const b = await apiProcess('api-publish');
  const user = await createUser(a, 'publisher');
  const names: string[] = [];
  for (const keyName of ['one', 'two']) {
    const made = await call(a, 'POST', '/ipns/keys', { key: user.apiKey, body: { name: keyName } });
    expect(made.status).toBe(201);
    names.push(made.body.ipnsName);
  }
  const target = (await upload(a, user, kib('target', 0), 'target')).body.cid as string;
  const { db } = a.deps;
  const updates = () => db.operations().get('findOneAndUpdate counters') ?? 0;
  const before = updates();
  const replies = await Promise.all(
    Array.from({ length: 100 }, (_, i) =>
      call(i % 2 === 0 ? a : b.url, 'POST', '/ipns/publish', {
        key: user.apiKey,
        body: { ipnsName: names[i % 4 < 2 ? 0 : 1], cid: target },
      }),
    ),
  );
  const outcomes: Record<string, number> = {};
  for (const r of replies) {
    const outcome = r.status === 200 ? '200' : `${r.status} ${r.body?.error?.reason ?? r.text.slice(0, 200)}`;
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }
  expect(outcomes).toEqual({ '200': 40, '402 IPNS_PUBLISH_LIMIT': 60 });
  expect(await db.counters.get(publishesKey(user.userId, Date.now()))).toBe(40);
  // Every publish that passed advanced its name once, and only those.
  const sequences = await Promise.all(names.map(async (n) => (await db.ipnsNames.get(n))!.sequence));
  expect(sequences[0]! + sequences[1]!).toBe(40);
  // Each answered sequence was given once: publishes of a name that went together (one read, one
  // conditional update command) or met another process's never took the same one.
  for (const [i, name] of names.entries()) {
    const given = replies.filter((r) => r.status === 200 && r.body.ipnsName === name).map((r) => r.body.sequence as number);
    expect(given.sort((x, y) => x - y)).toEqual(Array.from({ length: sequences[i]! }, (_, k) => k + 1));
  }
  // Publishes that went together kept their stamps, each with the sequence it took, in order.
  const kept = await Promise.all(names.map(async (n) => (await db.ipnsNames.get(n))!.publishStamps ?? []));
  expect(kept.flat().length).toBeGreaterThan(0);
  for (const [i, stamps] of kept.entries()) {
    const taken = stamps.map((e) => Number(e.split(':')[0]));
    expect(taken).toEqual([...taken].sort((x, y) => x - y));
    expect(Math.max(0, ...taken)).toBeLessThanOrEqual(sequences[i]!);
    expect(stamps.length).toBeLessThanOrEqual(STAMPS_KEPT);
  }
  // Process A took its 50 with fewer updates than takes (one each before).
  expect(updates() - before).toBeLessThan(50);
}, 120_000);

test('a key deleted through one API process is refused by another on its next request, both ways', async () => {
  const b = await apiProcess('api-keys');
  const user = await createUser(a);
  for (const [deleter, other] of [
    [a, b.url],
    [b.url, a],
  ] as const) {
    const created = await call(a, 'POST', '/apikeys', { key: user.apiKey });
    expect(created.status).toBe(201);
    // The other process has just used the key (what it read is what a memory would keep).
    expect((await call(other, 'GET', '/apikeys', { key: created.body.apiKey })).status).toBe(200);
    expect((await call(deleter, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: user.apiKey })).status).toBe(200);
    const next = await call(other, 'GET', '/apikeys', { key: created.body.apiKey });
    expect(next.status).toBe(401);
    expect(next.body.error.reason).toBe('UNAUTHORIZED');
  }
}, 120_000);

test("a key's rate limit counts its requests in every API process", async () => {
  const b = await apiProcess('api-rate');
  const user = await createUser(a, 'limited'); // 20 requests a minute
  // A window of its own: the limit counts per minute, and 30 requests take about 18 s.
  const left = RATE_WINDOW_MS - (Date.now() % RATE_WINDOW_MS);
  if (left < 25_000) await new Promise((r) => setTimeout(r, left + 100));
  const answers: number[] = [];
  for (let i = 0; i < 30; i++) {
    // Alternately A and B, 600 ms apart: more than the time a process takes to learn the other's
    // counts (each adds its own to MongoDB every 250 ms and reads the total back then).
    answers.push((await call(i % 2 === 0 ? a : b.url, 'GET', '/apikeys', { key: user.apiKey })).status);
    await new Promise((r) => setTimeout(r, 600));
  }
  const accepted = answers.filter((s) => s === 200).length;
  // Each process alone saw 15 requests, under the limit: had it counted only its own, all 30 pass.
  expect(accepted).toBeGreaterThanOrEqual(20);
  expect(accepted).toBeLessThanOrEqual(21);
  expect(answers.slice(0, 20).every((s) => s === 200)).toBe(true);
  expect(answers.filter((s) => s !== 200 && s !== 429)).toEqual([]);
}, 120_000);

test('gateway bytes are metered once, by the process that sent them', async () => {
  const b = await apiProcess('api-gateway');
  const user = await createUser(a);
  const content = kib('metered', 0).repeat(40); // 40 KiB
  const uploaded = await upload(a, user, content, 'metered.txt');
  expect(uploaded.status).toBe(201);
  const slug = (await a.deps.db.users.get(user.userId))!.gatewaySlug!;
  const read = (port: number) =>
    new Promise<number>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: `/ipfs/${uploaded.body.cid}`, headers: { Host: `${slug}.localhost:${port}` } }, (res) => {
          let n = 0;
          res.on('data', (c: Buffer) => (n += c.length));
          res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`gateway answered ${res.statusCode}`))));
        })
        .on('error', reject);
    });
  const aPort = Number(new URL(a.gatewayUrl).port);
  const sent = [await read(aPort), await read(b.gatewayPort), await read(aPort), await read(b.gatewayPort), await read(b.gatewayPort)];
  expect(sent.every((n) => n === content.length)).toBe(true);
  // Each process writes what it sent once a second.
  await eventually(
    () => gatewayBytesThisMonth(a.deps.db, user.userId),
    (bytes) => bytes >= 5 * content.length,
    10_000,
    'the gateway bytes written',
  );
  await new Promise((r) => setTimeout(r, 2500)); // nothing more comes
  expect(await gatewayBytesThisMonth(a.deps.db, user.userId)).toBe(5 * content.length);
}, 120_000);

test('an API process killed in the middle of its batches: every acknowledged upload stays, and the sweep alone makes the counters right', async () => {
  const c = await apiProcess('api-killed');
  const user = await createUser(a);
  const acknowledged: { id: string; cid: string; index: number }[] = [];
  let next = 0;
  let killed = false;
  const clients = Array.from({ length: 32 }, async () => {
    while (!killed && next < 2_000) {
      const index = next++;
      const reply = await upload(c.url, user, kib('killed', index), `k-${index}`).catch(() => null);
      if (reply?.status === 201) acknowledged.push({ id: reply.body.id, cid: reply.body.cid, index });
      if (!killed && acknowledged.length >= 150) {
        killed = true;
        process.kill(c.process.pid, 'SIGKILL');
      }
    }
  });
  await Promise.all(clients);
  expect(killed).toBe(true);
  await c.process.stop();

  // A new process serves every acknowledged upload.
  const restarted = await apiProcess('api-restarted');
  for (const { id, cid, index } of acknowledged) {
    const file = await call(restarted.url, 'GET', `/files/${id}`, { key: user.apiKey });
    expect(file.status).toBe(200);
    expect(file.body.cid).toBe(cid);
    expect(await cluster().allocation(cid)).not.toBeNull();
    expect((await collect(kubo().cat(cid))).toString()).toBe(kib('killed', index));
  }

  // What the kill left half-written (records without counters, counters without settling) is
  // found by the worker's scheduled sweep from the change log: no operator step.
  const healed = await eventually(
    () => countersAgree(user.userId),
    (r) => r.agree,
    240_000,
    'counters equal to the records',
  );
  expect(healed.compared?.stored.used).toBe(healed.compared?.fromRecords.used);
  // And every file that was written, acknowledged or not, is pinned.
  const files = await a.deps.db.files.model.find({ userId: user.userId }, { cid: 1 }).lean<{ cid: string }[]>().exec();
  expect(files.length).toBeGreaterThanOrEqual(acknowledged.length);
  await eventually(
    async () => (await Promise.all(files.map(async (f) => (await cluster().allocation(parseCid(f.cid).v1)) !== null))).every(Boolean),
    (all) => all,
    120_000,
    'every written file pinned',
  );
}, 600_000);
