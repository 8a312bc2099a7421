// Pins survive the failures a long-running service meets: a worker killed mid-pin, and the
// IPFS Cluster peer going away while a pin waits.
import path from 'node:path';
import { startClusterPeer } from '../stack/cluster.js';
import { freePorts } from '../stack/ports.js';
import { createClusterClient } from '../infra/ipfs/cluster.js';
import { pinJob, pinWait } from '../infra/temporal/contracts/pins.js';
import { call, createUser, stack, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { bytes, collect, kubo } from './support/content.js';
import { startSecondNode } from './support/second-node.js';
import { eventually, startWorkerProcess, testTaskQueue } from './support/worker.js';

test('a worker killed mid-pin is replaced, and the new one finishes the pin', async () => {
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
  const api = await startTestApi(env);
  let second = await startSecondNode();
  let worker = await startWorkerProcess(env);
  try {
    const user = await createUser(api);
    const content = await collect(bytes(200_000, 'survives-a-crash'));
    const cid = (await second.client.add(content, { cidVersion: 1, rawLeaves: true })).cid.toString();
    const origin = second.node.swarmAddress;
    // The origin goes away: the pin can only wait.
    await second.node.stop();

    await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid, origins: [origin] } });
    await eventually(
      () => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey }),
      (r) => r.body.status === 'pinning',
      30_000,
      'pinning',
    );

    await worker.kill('SIGKILL');
    // The origin comes back (same repo and ports, so the same address), and so does a worker.
    second = await startSecondNode(second.dataDir, second.ports);
    worker = await startWorkerProcess(env);

    const done = await eventually(
      () => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey }),
      (r) => r.body.status === 'pinned',
      60_000,
      'pinned',
    );
    expect(done.body.size).toBe(200_000);
    expect((await collect(kubo().cat(cid))).equals(content)).toBe(true);
  } finally {
    await Promise.all([api.close(), worker.kill(), second.node.stop()]);
  }
}, 120_000);

test('a pin waits out an IPFS Cluster outage and completes when it is back', async () => {
  // A Cluster peer of this test's own, driving the stack's Kubo, so it can be stopped.
  const dir = tempDir('stupa-cluster-');
  const [api_, swarm] = await freePorts(2);
  const ports = { api: api_!, swarm: swarm! };
  const options = { dataDir: path.join(dir, 'peer'), logDir: path.join(dir, 'logs'), ports, kuboApiUrl: stack.kuboApiUrl };
  let peer = await startClusterPeer(options);
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue(), CLUSTER_API_URL: peer.apiUrl };
  const [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  let user: TestUser;
  try {
    user = await createUser(api);
    await peer.stop();
    const cid = (
      await kubo().add(await collect(bytes(5000, 'cluster-outage')), { cidVersion: 1, rawLeaves: true, pin: false })
    ).cid.toString();
    const res = await call(api, 'POST', '/pin', { key: user.apiKey, body: { cid } });
    expect(res.status).toBe(202);
    // While Cluster is down the request is honest about it: once the pin's long wait has
    // found Cluster unreachable, the request says `pinning`, not pinned nor failed.
    const handle = api.deps.temporal.client.workflow.getHandle(pinJob.workflowId({ cid, userId: user.userId }));
    await eventually(
      async () => (await handle.describe()).raw.pendingActivities?.[0],
      (activity) =>
        activity?.activityType?.name === pinWait.activity &&
        /cluster unreachable/.test(Buffer.from(activity.heartbeatDetails?.payloads?.[0]?.data ?? []).toString()),
      30_000,
      'the pin waiting with Cluster unreachable',
    );
    expect((await call(api, 'GET', `/pin/${cid}`, { key: user.apiKey })).body.status).toBe('pinning');
    expect((await call(api, 'GET', '/readyz')).body.checks.cluster).toMatch(/^unreachable/);

    peer = await startClusterPeer(options);
    await eventually(
      () => call(api, 'GET', `/pin/${cid}`, { key: user.apiKey }),
      (r) => r.body.status === 'pinned',
      90_000,
      'pinned',
    );
    const info = await createClusterClient(peer.apiUrl).status(cid);
    expect(Object.values(info.peer_map).map((p) => p.status)).toEqual(['pinned']);
  } finally {
    await Promise.all([api.close(), worker.kill()]);
    await peer.stop();
  }
}, 150_000);
