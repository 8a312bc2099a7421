// Webhooks against a real receiver on loopback (WEBHOOK_ALLOW_PRIVATE=true here) and a worker
// process of this file's own task queue, with the retry period shortened to seconds
// (WEBHOOK_RETRY_PERIOD): every event arrives signed so that the `standardwebhooks` verifier
// accepts it; a failing receiver gets the same `webhook-id` on every attempt; a receiver down
// (and the worker killed meanwhile) gets everything, in order, when it comes back; an endpoint
// failing for the whole period is paused and says so in its log.
import crypto from 'node:crypto';
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { Webhook } from 'standardwebhooks';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import { parseCid } from '../infra/ipfs/cid.js';
import { newFileId } from '../infra/db/files.js';
import { createKubo } from '../infra/ipfs/kubo.js';
import { WEBHOOK_EVENT_TYPES } from '../core/webhook-events.js';
import { sendWebhook } from '../infra/webhook-send.js';
import { s3Client } from './support/s3.js';
import { api, env, killWorker, port, receiver, restartWorker, user, useWebhookStack } from './support/webhooks.js';
import { call, createUser, errorReason, stack, startTestApi, testEnv, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess } from './support/worker.js';

const RETRY_PERIOD_S = 10;
const hooks = receiver((path, n) => (path === '/flaky' && n <= 3 ? 500 : 200));
useWebhookStack(hooks, { WEBHOOK_RETRY_PERIOD: `${RETRY_PERIOD_S}s`, PIN_TIMEOUT: '3s' });

const as = (u: TestUser, method: string, path: string, body?: unknown) => call(api, method, path, { key: u.apiKey, body });

async function newWebhook(u: TestUser, path: string, events: readonly string[] = WEBHOOK_EVENT_TYPES, url?: string) {
  const made = await as(u, 'POST', '/webhooks', { url: url ?? `http://127.0.0.1:${port}${path}`, events, description: path });
  expect(made.status).toBe(201);
  return made.body as { id: string; secret: string; url: string; events: string[]; enabled: boolean };
}

const deliveries = async (u: TestUser, id: string) => (await as(u, 'GET', `/webhooks/${id}/deliveries?limit=100`)).body.items as any[];

test('endpoints are made, read, changed and deleted; the secret is shown once; another account gets 404; the plan limits them', async () => {
  const made = await newWebhook(user, '/crud', ['pin.pinned']);
  expect(made.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
  expect(made).toMatchObject({ url: `http://127.0.0.1:${port}/crud`, events: ['pin.pinned'], enabled: true });
  const read = await as(user, 'GET', `/webhooks/${made.id}`);
  expect(read.status).toBe(200);
  expect(read.body.secret).toBeUndefined();
  const listed = await as(user, 'GET', '/webhooks');
  expect(listed.body.items.map((w: { id: string }) => w.id)).toContain(made.id);
  expect(JSON.stringify(listed.body)).not.toContain('whsec_');

  const changed = await as(user, 'PUT', `/webhooks/${made.id}`, { events: ['pin.failed', 'pin.pinned'], enabled: false });
  expect(changed.body).toMatchObject({ events: ['pin.failed', 'pin.pinned'], enabled: false });
  expect((await api.deps.db.webhooks.byId(made.id))?.enabled).toBe(false);
  expect(errorReason(await as(user, 'PUT', `/webhooks/${made.id}`, { events: ['no.such'] }))).toBe('INVALID_INPUT');
  expect(errorReason(await as(user, 'POST', '/webhooks', { url: 'ftp://x.example/', events: ['pin.pinned'] }))).toBe('INVALID_WEBHOOK_URL');

  const other = await createUser(api, 'bodhi');
  for (const [method, path] of [
    ['GET', `/webhooks/${made.id}`],
    ['PUT', `/webhooks/${made.id}`],
    ['DELETE', `/webhooks/${made.id}`],
    ['GET', `/webhooks/${made.id}/deliveries`],
    ['POST', `/webhooks/${made.id}/test`],
  ] as const) {
    const reply = await as(other, method, path, method === 'PUT' ? { enabled: true } : undefined);
    expect([path, reply.status]).toEqual([path, 404]);
  }
  expect((await as(other, 'GET', '/webhooks')).body.items).toEqual([]);

  // The plan allows 6: the seventh is 402.
  const more = [];
  for (let i = 0; i < 6; i++) more.push(await newWebhook(other, `/limit-${i}`, ['pin.pinned']));
  const refused = await as(other, 'POST', '/webhooks', { url: `http://127.0.0.1:${port}/x`, events: ['pin.pinned'] });
  expect([refused.status, errorReason(refused)]).toEqual([402, 'WEBHOOK_LIMIT']);
  expect((await as(other, 'DELETE', `/webhooks/${more[0]!.id}`)).status).toBe(200);
  expect((await as(other, 'GET', `/webhooks/${more[0]!.id}`)).status).toBe(404);
  await newWebhook(other, '/limit-again', ['pin.pinned']);

  expect((await as(user, 'DELETE', `/webhooks/${made.id}`)).status).toBe(200);
  expect(await api.deps.db.webhooks.byId(made.id)).toBeNull();
});

test('every event type arrives once, signed so that the standardwebhooks verifier accepts it, with the resource as the API shows it', async () => {
  const hook = await newWebhook(user, '/all');
  const verifier = new Webhook(hook.secret);
  const kubo = createKubo(stack.kuboApiUrl);

  // upload.created, and quota.near: 900,000 bytes of a 1 MiB plan pass 80 %.
  const big = crypto.randomBytes(900_000);
  const upload = await call(api, 'POST', '/upload/new', {
    key: user.apiKey,
    body: { content: big.toString('base64'), name: 'big.bin', encoding: 'base64' },
  });
  expect(upload.status).toBe(201);
  // quota.reached: the next upload does not fit.
  const full = await as(user, 'POST', '/upload/new', { content: 'x'.repeat(200_000), name: 'too-much.txt' });
  expect(errorReason(full)).toBe('STORAGE_LIMIT');
  // file.deleted frees the room again.
  expect((await as(user, 'DELETE', `/files/${upload.body.id}`)).status).toBe(200);
  // pin.queued and pin.pinned: content Kubo has; pin.failed: content nobody has (PIN_TIMEOUT 3 s).
  const local = (await kubo.add(crypto.randomBytes(100), { cidVersion: 1, pin: false })).cid.toString();
  expect((await as(user, 'POST', '/pin', { cid: local })).status).toBeLessThan(300);
  const missing = 'bafkreie7q3iidccmpvszul7kudcvvuavuo7u6gzlbobczuk5nqk3b4akba';
  expect((await as(user, 'POST', '/pin', { cid: missing })).status).toBeLessThan(300);
  // snapshot.completed
  const folderId = (await as(user, 'POST', '/folders', { name: 'snap' })).body.folderId as string;
  await as(user, 'POST', '/upload/new', { content: 'in the folder', name: 'a.txt', folderId });
  expect((await as(user, 'POST', `/folders/${folderId}/snapshot`)).status).toBeLessThan(300);
  // ipns.published
  const name = (await as(user, 'POST', '/ipns/keys', { name: 'hooked' })).body.ipnsName as string;
  expect((await as(user, 'POST', '/ipns/publish', { ipnsName: name, cid: local })).status).toBe(200);
  // s3.object.created
  const s3 = s3Client(api, user);
  const bucket = `hooks-${crypto.randomBytes(4).toString('hex')}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k.txt', Body: 'an object' }));
  // webhook.test
  expect((await as(user, 'POST', `/webhooks/${hook.id}/test`)).status).toBe(202);

  // snapshot.failed and ipns.republish_failing have tests of their own below.
  // Two uploads (big.bin, a.txt) and two pin requests: two events of each.
  const made = WEBHOOK_EVENT_TYPES.filter((t) => t !== 'snapshot.failed' && t !== 'ipns.republish_failing');
  const expected: string[] = [...made, 'upload.created', 'pin.queued', 'webhook.test'];
  const typesOf = () => hooks.at('/all').map((r) => (JSON.parse(r.body) as { type: string }).type);
  await eventually(
    async () => typesOf(),
    (types) => types.length >= expected.length,
    60_000,
    'every event type delivered',
  );
  await new Promise((r) => setTimeout(r, 1000)); // any duplicate would arrive by now
  const received = hooks.at('/all');
  expect(typesOf().sort()).toEqual([...expected].sort());
  expect(new Set(received.map((r) => r.headers['webhook-id'])).size).toBe(received.length);
  const byType = new Map<string, { type: string; timestamp: string; data: any }>();
  for (const r of received) {
    const payload = verifier.verify(r.body, r.headers) as { type: string; timestamp: string; data: any };
    expect(Number.isNaN(Date.parse(payload.timestamp))).toBe(false);
    // The first of each type (big.bin's upload, the local pin's queueing).
    if (!byType.has(payload.type)) byType.set(payload.type, payload);
  }
  expect(() => new Webhook(`whsec_${crypto.randomBytes(24).toString('base64')}`).verify(received[0]!.body, received[0]!.headers)).toThrow();

  expect(byType.get('upload.created')!.data).toMatchObject({ id: upload.body.id, cid: upload.body.cid, size: 900_000, name: 'big.bin' });
  expect(byType.get('file.deleted')!.data).toMatchObject({ id: upload.body.id, cid: upload.body.cid });
  expect(byType.get('quota.near')!.data).toMatchObject({ storageLimitBytes: 1024 * 1024 });
  expect(byType.get('quota.near')!.data.storageUsedBytes).toBeGreaterThanOrEqual(900_000);
  expect(byType.get('pin.pinned')!.data).toMatchObject({ cid: local, status: 'pinned' });
  expect(byType.get('pin.failed')!.data).toMatchObject({ cid: missing, status: 'failed' });
  expect(byType.get('snapshot.completed')!.data).toMatchObject({ folderId, fileCount: 1 });
  expect(byType.get('ipns.published')!.data).toMatchObject({ ipnsName: name, cid: local, published: true });
  expect(byType.get('s3.object.created')!.data).toMatchObject({ bucket, key: 'k.txt', size: 9 });
  // One pin's events in order: queued before pinned.
  const pinTypes = received.map((r) => JSON.parse(r.body)).filter((p) => p.type.startsWith('pin.') && p.data.cid === local);
  expect(pinTypes.map((p) => p.type)).toEqual(['pin.queued', 'pin.pinned']);
  // The log has one delivered delivery per event, each with its one attempt.
  const log = await deliveries(user, hook.id);
  expect(log).toHaveLength(expected.length);
  for (const d of log) expect(d).toMatchObject({ state: 'delivered', attempts: [{ statusCode: 200 }] });
}, 120_000);

test('quota.near names the storage after the write that passes 80 % (an upload, an S3 PutObject), not the size of that write alone', async () => {
  const viaRest = await createUser(api, 'bodhi');
  const viaS3 = await createUser(api, 'bodhi');
  await newWebhook(viaRest, '/near-rest', ['quota.near']);
  await newWebhook(viaS3, '/near-s3', ['quota.near']);
  // 500,000 bytes of 1 MiB (48 %), then 400,000 more (86 %): the second write passes 80 %.
  for (const [n, fill] of [
    [500_000, 'a'],
    [400_000, 'b'],
  ] as const)
    expect((await as(viaRest, 'POST', '/upload/new', { content: fill.repeat(n), name: `${fill}.txt` })).status).toBe(201);
  const s3 = s3Client(api, viaS3);
  const bucket = `near-${crypto.randomBytes(4).toString('hex')}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  for (const [n, fill] of [
    [500_000, 'a'],
    [400_000, 'b'],
  ] as const)
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `${fill}.txt`, Body: fill.repeat(n) }));
  for (const path of ['/near-rest', '/near-s3']) {
    const got = await eventually(
      async () => hooks.at(path),
      (r) => r.length >= 1,
      30_000,
      `quota.near at ${path}`,
    );
    const event = JSON.parse(got[0]!.body) as { type: string; data: unknown };
    expect(event.type).toBe('quota.near');
    expect(event.data).toEqual({ storageUsedBytes: 900_000, storageLimitBytes: 1024 * 1024, percentUsed: 85.8 });
  }
  await new Promise((r) => setTimeout(r, 1000)); // a second one would arrive by now
  expect(hooks.at('/near-rest').length + hooks.at('/near-s3').length).toBe(2);
}, 60_000);

test('a receiver that answers 500 three times then 200 gets the event four times with one webhook-id', async () => {
  const hook = await newWebhook(user, '/flaky', ['pin.pinned']);
  const sent = await as(user, 'POST', `/webhooks/${hook.id}/test`);
  expect(sent.status).toBe(202);
  await eventually(
    async () => hooks.at('/flaky').length,
    (n) => n >= 4,
    30_000,
    'four attempts',
  );
  await new Promise((r) => setTimeout(r, 1000));
  const got = hooks.at('/flaky');
  expect(got).toHaveLength(4);
  expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([sent.body.eventId]));
  const [delivery] = await deliveries(user, hook.id);
  expect(delivery).toMatchObject({ id: sent.body.id, state: 'delivered' });
  expect(delivery.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 500, 200]);
  // Redelivery: the same event again, as a new try.
  expect((await as(user, 'POST', `/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`)).status).toBe(202);
  await eventually(
    async () => hooks.at('/flaky').length,
    (n) => n === 5,
    30_000,
    'the redelivery',
  );
  expect(hooks.at('/flaky')[4]!.headers['webhook-id']).toBe(sent.body.eventId);
}, 60_000);

test('a receiver down while the worker is killed gets everything, in order, when both come back', async () => {
  const late = receiver();
  const latePort = await late.listen();
  await late.close(); // a port nobody listens on, for now
  const hook = await newWebhook(user, '/late', ['pin.pinned'], `http://127.0.0.1:${latePort}/late`);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await as(user, 'POST', `/webhooks/${hook.id}/test`)).body.eventId);
  await eventually(async () => (await deliveries(user, hook.id)).some((d) => d.attempts.length > 0), Boolean, 20_000, 'a failed attempt');
  await killWorker();
  await late.listen(latePort);
  await restartWorker();
  await eventually(
    async () => late.got.length,
    (n) => n >= 5,
    30_000,
    'everything delivered',
  );
  await new Promise((r) => setTimeout(r, 500));
  const order = [...new Map(late.got.map((r) => [r.headers['webhook-id'], true])).keys()];
  expect(order).toEqual(ids);
  await late.close();
  const log = await deliveries(user, hook.id);
  expect(log.every((d) => d.state === 'delivered')).toBe(true);
  expect((await as(user, 'GET', `/webhooks/${hook.id}`)).body.failingSince).toBeNull();
}, 90_000);

test('an endpoint failing for the whole retry period is paused, and its log says so', async () => {
  const dead = receiver();
  const deadPort = await dead.listen();
  await dead.close();
  const hook = await newWebhook(user, '/dead', ['pin.pinned'], `http://127.0.0.1:${deadPort}/dead`);
  await as(user, 'POST', `/webhooks/${hook.id}/test`);
  const paused = await eventually(
    async () => (await as(user, 'GET', `/webhooks/${hook.id}`)).body,
    (w) => w.enabled === false,
    RETRY_PERIOD_S * 1000 + 30_000,
    'the endpoint paused',
  );
  expect(paused.disabledReason).toMatch(/every delivery failed/);
  const log = await deliveries(user, hook.id);
  expect(log.map((d) => [d.eventType, d.state])).toEqual([
    ['webhook.disabled', 'failed'],
    ['webhook.test', expect.stringMatching(/^(failed|pending)$/)],
  ]);
  expect(log[1].attempts.length).toBeGreaterThan(3);
  // Enabled again, it takes events again.
  expect((await as(user, 'PUT', `/webhooks/${hook.id}`, { enabled: true })).body).toMatchObject({ enabled: true, disabledReason: null });
}, 90_000);

test('private, loopback and link-local addresses are refused at creation and at delivery unless the operator allows them', async () => {
  const strict = await startTestApi(testEnv({ TEMPORAL_TASK_QUEUE: env.TEMPORAL_TASK_QUEUE }));
  try {
    const owner = await createUser(strict, 'bodhi');
    const make = (url: string) => call(strict, 'POST', '/webhooks', { key: owner.apiKey, body: { url, events: ['pin.pinned'] } });
    for (const url of [
      'https://127.0.0.1/h',
      'https://localhost/h',
      'https://10.1.2.3/h',
      'https://169.254.169.254/latest',
      'https://[::1]/h',
    ]) {
      const reply = await make(url);
      expect([url, reply.status, errorReason(reply)]).toEqual([url, 400, 'WEBHOOK_ADDRESS_REFUSED']);
    }
    expect(errorReason(await make(`http://127.0.0.1:${port}/h`))).toBe('INVALID_WEBHOOK_URL');
  } finally {
    await strict.close();
  }
  // At delivery, the address is checked as the connection is made: `localhost` resolves to loopback.
  const before = hooks.got.length;
  const refused = await sendWebhook({
    url: `http://localhost:${port}/strict`,
    secret: `whsec_${crypto.randomBytes(24).toString('base64')}`,
    eventId: 'msg_strict',
    body: '{}',
    allowPrivate: false,
  });
  expect(refused).toMatchObject({ ok: false, statusCode: null });
  expect(refused.error).toMatch(/loopback/);
  expect(hooks.got.length).toBe(before);
});

test('snapshot.failed: a snapshot job cancelled by an operator is announced', async () => {
  const hook = await newWebhook(user, '/snapfail', ['snapshot.failed', 'snapshot.completed']);
  const folderId = (await as(user, 'POST', '/folders', { name: 'never snapshotted' })).body.folderId as string;
  // A file whose content Kubo does not have: the job waits for its blocks until cancelled.
  const cid = parseCid(CID.create(1, raw.code, await sha256.digest(crypto.randomBytes(32))).toString());
  const now = Date.now();
  await api.deps.db.files.insert({
    _id: newFileId(),
    userId: user.userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: 'missing.bin',
    description: null,
    size: 32,
    dagSize: null,
    mimeType: 'application/octet-stream',
    folderId,
    metadata: {},
    createdAt: now,
    updatedAt: now,
  });
  const job = await as(user, 'POST', `/folders/${folderId}/snapshot`);
  expect(job.status).toBe(202);
  await api.deps.temporal.client.workflow.getHandle(`snapshot:${job.body.id}`).cancel();
  await eventually(
    async () => hooks.at('/snapfail').length,
    (n) => n >= 1,
    30_000,
    'snapshot.failed delivered',
  );
  const payload = new Webhook(hook.secret).verify(hooks.at('/snapfail')[0]!.body, hooks.at('/snapfail')[0]!.headers) as any;
  expect(payload).toMatchObject({ type: 'snapshot.failed', data: { folderId, error: expect.stringMatching(/cancel/i) } });
});

test('ipns.republish_failing: a name whose republishing begins to fail is announced once', async () => {
  // A pair of its own: the API publishes through the test stack's Kubo; the worker republishes
  // through a Kubo that is not there.
  const queue = `webhooks-ipns-${crypto.randomUUID()}`;
  const own = testEnv({ TEMPORAL_TASK_QUEUE: queue, WEBHOOK_ALLOW_PRIVATE: 'true', IPNS_REPUBLISH_INTERVAL: '1s' });
  const dead = receiver();
  const deadPort = await dead.listen();
  await dead.close();
  const [ipnsApi, badWorker] = await Promise.all([
    startTestApi(own),
    startWorkerProcess({ ...own, KUBO_API_URL: `http://127.0.0.1:${deadPort}` }),
  ]);
  try {
    const owner = await createUser(ipnsApi, 'bodhi');
    const hook = (
      await call(ipnsApi, 'POST', '/webhooks', {
        key: owner.apiKey,
        body: { url: `http://127.0.0.1:${port}/republish`, events: ['ipns.republish_failing'] },
      })
    ).body;
    const target = (await call(ipnsApi, 'POST', '/upload/new', { key: owner.apiKey, body: { content: 'named', name: 'n.txt' } })).body.cid;
    const name = (await call(ipnsApi, 'POST', '/ipns/keys', { key: owner.apiKey, body: { name: 'failing' } })).body.ipnsName;
    expect((await call(ipnsApi, 'POST', '/ipns/publish', { key: owner.apiKey, body: { ipnsName: name, cid: target } })).status).toBe(200);
    await eventually(
      async () => hooks.at('/republish').length,
      (n) => n >= 1,
      30_000,
      'ipns.republish_failing delivered',
    );
    await new Promise((r) => setTimeout(r, 3000)); // more failed republishes: still one event
    const got = hooks.at('/republish');
    expect(got).toHaveLength(1);
    const payload = new Webhook(hook.secret).verify(got[0]!.body, got[0]!.headers) as any;
    expect(payload).toMatchObject({
      type: 'ipns.republish_failing',
      data: { ipnsName: name, cid: target, failingSince: expect.any(Number) },
    });
    expect(payload.data.error).toEqual(expect.any(String));
  } finally {
    await Promise.all([ipnsApi.close(), badWorker.kill()]);
  }
}, 90_000);
