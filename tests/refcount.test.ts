// The reference-count race: many users pinning, unpinning and uploading one CID at once
// must leave it pinned in Cluster exactly when somebody holds it; also with the requests split
// between two API processes on one database (this one and `npm run api`'s own), each with its
// own connection and group-commit batches (infra/db/batch.ts).
import pLimit from 'p-limit';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { pinJob } from '../infra/temporal/contracts/pins.js';
import { syncJob } from '../infra/temporal/contracts/holds.js';
import { startApiServer } from '../api/server.js';
import { loadConfig } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { freePorts } from '../stack/ports.js';
import type { ManagedProcess } from '../stack/process.js';
import { startApiProcess } from '../stack/services.js';
import { call, createUser, plansFile, tempDir, testEnv, type TestUser } from './support/stack.js';
import { cluster, kubo } from './support/content.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
/** A second API process (`npm run api`) on the same database and settings. */
let other: { url: string; process: ManagedProcess };
let worker: WorkerProcess;
let users: TestUser[];
const queue = testTaskQueue();

beforeAll(async () => {
  const env = testEnv({
    TEMPORAL_TASK_QUEUE: queue,
    PLANS_FILE: plansFile({ dharma: { requestsPerMinute: 100_000 } }),
    LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent',
  });
  const [port] = await freePorts(1);
  const config = loadConfig(env);
  const started = await Promise.all([
    startApiServer(config, createLogger(config.logLevel)),
    startWorkerProcess(env),
    startApiProcess({ ...env, API_PORT: String(port) }, { logDir: tempDir('stupa-api-'), name: 'api-b' }),
  ]);
  [api, worker] = started;
  other = { url: `http://127.0.0.1:${port}`, process: started[2] };
  users = [await createUser(api), await createUser(api)];
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), other?.process.stop()]);
});

/** The workflow's state: describe() reads it directly (list queries read the lagging visibility store). */
async function workflowStatus(workflowId: string): Promise<string> {
  try {
    return (await api.deps.temporal.client.workflow.getHandle(workflowId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NONE';
    throw err;
  }
}

/**
 * Waits until nothing is left to do for the CID, then reads Cluster and the holds. Pin
 * workflows pin too, and may signal the sync workflow as they end, so they are read first.
 */
async function settledState(cid: string) {
  const { multihash } = parseCid(cid);
  await eventually(
    async () => {
      const pins = await Promise.all(users.map((u) => workflowStatus(pinJob.workflowId({ cid, userId: u.userId }))));
      return [...pins, await workflowStatus(syncJob.workflowId({ multihash }))];
    },
    (statuses) => !statuses.includes('RUNNING'),
    60_000,
    'pin and sync workflows settled',
  );
  const holders = (await api.deps.db.holds.of(multihash)).holders;
  const pinnedInCluster = (await cluster().allocations()).some((a) => a.cid === cid);
  return { holders, pinnedInCluster };
}

/** Whether the stack's Kubo has the CID pinned (Cluster pins there). */
async function pinnedInKubo(cid: string): Promise<boolean> {
  try {
    for await (const _ of kubo().pin.ls({ paths: [cid] as never })) return true;
  } catch {
    // "is not pinned"
  }
  return false;
}

test.each([
  ['ends held', true, 1],
  ['ends unheld', false, 1],
  ['ends held, over two API processes', true, 2],
  ['ends unheld, over two API processes', false, 2],
])(
  'hundreds of interleaved pins, unpins and uploads by two users (%s)',
  async (_label, endHeld, processCount) => {
    const text = `refcount ${endHeld} ${processCount} ${Date.now()}`;
    const cid = (await kubo().add(Buffer.from(text), { pin: false })).cid.toString();
    const limit = pLimit(12);
    const ops: Promise<unknown>[] = [];
    let seed = endHeld ? 7 : 11;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 300; i++) {
      const user = users[Math.floor(random() * users.length)]!;
      const r = random();
      const target = processCount === 2 && random() < 0.5 ? other.url : api;
      ops.push(
        limit(() =>
          r < 0.45
            ? call(target, 'POST', '/pin', { key: user.apiKey, body: { cid } })
            : r < 0.55
              ? call(target, 'POST', '/upload/new', { key: user.apiKey, body: { content: text } })
              : call(target, 'DELETE', `/pin/${cid}`, { key: user.apiKey }),
        ),
      );
    }
    const replies = (await Promise.all(ops)) as { status: number; body: unknown }[];
    expect(replies.filter((r) => ![200, 201, 202, 404].includes(r.status)).map((r) => [r.status, r.body])).toEqual([]);

    // The last word: one user keeps it, or both let go.
    await Promise.all(users.map((u) => call(api, 'DELETE', `/pin/${cid}`, { key: u.apiKey })));
    if (endHeld) expect((await call(api, 'POST', '/pin', { key: users[1]!.apiKey, body: { cid } })).status).toBe(202);

    const state = await settledState(cid);
    expect(state.holders.length > 0).toBe(endHeld);
    expect(state.pinnedInCluster).toBe(endHeld);
    await eventually(
      () => pinnedInKubo(cid),
      (pinned) => pinned === endHeld,
      30_000,
      'Kubo pin state',
    );
    if (endHeld) {
      await eventually(
        () => call(api, 'GET', `/pin/${cid}`, { key: users[1]!.apiKey }),
        (r) => r.body.status === 'pinned',
        30_000,
        'pinned',
      );
    }
  },
  180_000,
);
