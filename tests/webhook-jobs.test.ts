// The delivery job's mechanics, with a real receiver on loopback and a worker process of this
// file's own task queue: an event recorded twice is one delivery; a delivery's data is stored as
// text and older nested data is still sent; a stream of events wakes the job about once a second
// (the rounds linger, and the recorder counts on it), with none of them left waiting.
import { webhookEventIndex } from '../infra/db/migrations/0002-webhook-event-index.js';
import { WEBHOOK_POLL_MS, WEBHOOK_ROUND_LINGER_MS, WEBHOOK_WAKE_DELAY_MS } from '../infra/constants.js';
import { webhookJob } from '../infra/temporal/contracts/webhooks.js';
import { deliveryId, recordFor } from '../core/webhook-events.js';
import { api, port, receiver, user, useWebhookStack } from './support/webhooks.js';
import { call, createUser, type TestUser } from './support/stack.js';
import { eventually } from './support/worker.js';

const hooks = receiver();
useWebhookStack(hooks);

async function newWebhook(u: TestUser, path: string, events: string[]) {
  const made = await call(api, 'POST', '/webhooks', { key: u.apiKey, body: { url: `http://127.0.0.1:${port}${path}`, events } });
  expect(made.status).toBe(201);
  return made.body as { id: string };
}

test('an event recorded twice for an endpoint (a retried activity) is one delivery, sent once, its ID derived from both; the old unique index is dropped', async () => {
  const hook = await newWebhook(user, '/twice', ['pin.pinned']);
  const event = { type: 'pin.pinned', subject: 'pin:twice', data: { pin: { requestId: 'twice' } }, id: 'msg_pinned_twice' } as const;
  const deps = { db: api.deps.db, jobs: api.deps.jobs };
  await recordFor(deps, user.userId, [hook.id], event);
  await recordFor(deps, user.userId, [hook.id], event);
  const Deliveries = api.deps.db.webhooks.deliveryModel;
  expect((await Deliveries.find({ webhookId: hook.id }).lean()).map((d) => d._id)).toEqual([deliveryId(hook.id, event.id)]);
  await eventually(
    async () => hooks.at('/twice').length,
    (n) => n === 1,
    30_000,
    'the delivery',
  );
  await new Promise((r) => setTimeout(r, 500));
  expect(hooks.at('/twice').map((r) => r.headers['webhook-id'])).toEqual([event.id]);
  // A database from before derived IDs has the unique (webhookId, eventId) index: migration 2 drops it.
  await Deliveries.collection.createIndex({ webhookId: 1, eventId: 1 }, { unique: true });
  await webhookEventIndex.contract!(api.deps.db);
  const names = (await Deliveries.collection.indexes()).map((i) => i.name);
  expect(names).not.toContain('webhookId_1_eventId_1');
  expect(names).toContain('webhookId_1_state_1_seq_1');
}, 60_000);

test("the delivery's data is stored as JSON text; a delivery recorded before, with its data as a nested document, is sent all the same", async () => {
  const owner = await createUser(api, 'bodhi');
  const hook = await newWebhook(owner, '/stored', ['ipns.published']);
  const Deliveries = api.deps.db.webhooks.deliveryModel;
  const data = { ipnsName: 'k51stored', cid: 'bafkreidqt2amrbehujar4hxe3647ekugcsjnedchmukqyddzjk6xb6aupq', sequence: 1, published: true };
  const [recorded] = await recordFor({ db: api.deps.db, jobs: api.deps.jobs }, owner.userId, [hook.id], {
    type: 'ipns.published',
    subject: 'ipns:k51stored',
    data,
  });
  expect((await Deliveries.collection.findOne({ _id: recorded!._id as never }))?.data).toBe(JSON.stringify(data));
  // As an older version wrote it: the same record, `data` nested.
  const old = { ...recorded!, _id: 'dlv_nestedBeforeText0', eventId: 'msg_nested_before_text', seq: recorded!.seq + 1 };
  await Deliveries.collection.insertOne(old as never);
  await recordFor({ db: api.deps.db, jobs: api.deps.jobs }, owner.userId, [hook.id], {
    type: 'ipns.published',
    subject: 'ipns:other',
    data,
  });
  await eventually(
    async () => hooks.at('/stored').length,
    (n) => n === 3,
    30_000,
    'the three deliveries',
  );
  const sent = hooks.at('/stored').find((r) => r.headers['webhook-id'] === 'msg_nested_before_text')!;
  expect(JSON.parse(sent.body)).toMatchObject({ type: 'ipns.published', data });
  for (const r of hooks.at('/stored')) expect(JSON.parse(r.body).data).toEqual(data);
}, 60_000);

test('a stream of events wakes the job about once a second; an event its recorder counted on a lingering round for is sent', async () => {
  const hook = await newWebhook(user, '/stream', ['pin.pinned']);
  const deps = { db: api.deps.db, jobs: api.deps.jobs };
  const handle = api.deps.temporal.client.workflow.getHandle(webhookJob.workflowId({ webhookId: hook.id }));
  const signals = async () => ((await handle.fetchHistory()).events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes).length;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const record = (name: string) =>
    recordFor(deps, user.userId, [hook.id], {
      type: 'pin.pinned',
      subject: `pin:${name}`,
      data: { pin: { requestId: name } },
      id: `msg_${name}`,
    });
  const sent = async (n: number) =>
    eventually(
      async () => hooks.at('/stream').length,
      (got) => got === n,
      // Well under the job's own look for lost wake-ups (5 minutes): only a wake-up, or a round
      // still looking, brings them this soon.
      20_000,
      `${n} deliveries`,
    );

  // Ten events further apart than the wake-up's delay: one signal each if every event sent its own.
  for (let i = 0; i < 10; i++) {
    await record(`stream-${i}`);
    await sleep(WEBHOOK_WAKE_DELAY_MS + 200);
  }
  await sent(10);
  const afterStream = await signals();
  expect(afterStream).toBeGreaterThanOrEqual(1);
  expect(afterStream).toBeLessThanOrEqual(6);

  // Quiet, then A (its own signal) and B after the round that sent A has had time to look and
  // find nothing more: B sends no signal, and only a round that lingers sees it.
  await sleep(WEBHOOK_ROUND_LINGER_MS + 500);
  await record('a');
  await sleep(WEBHOOK_WAKE_DELAY_MS + 2 * WEBHOOK_POLL_MS);
  await record('b');
  await sent(12);
  expect(await signals()).toBe(afterStream + 1);
}, 60_000);
