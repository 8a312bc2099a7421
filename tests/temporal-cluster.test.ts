// The production shape of Temporal (STACK_TEMPORAL=cluster: stack/temporal-cluster.ts): its own
// server's services as separate processes on PostgreSQL, set up by the project, under the chaos
// run's mixed load while a history service, a matching service, the frontend and the worker
// service are each killed with SIGKILL and PostgreSQL is stopped with `pg_ctl stop -m
// immediate`, one at a time, each started again by the stack (scripts/chaos/load.ts says what is
// checked after). A stack of its own (FerretDB, Kubo, Cluster, an API and a worker process),
// not the test stack: its Temporal is the dev server.
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { startChaosStack, type ChaosStack } from '../scripts/chaos/engines.js';
import { runChaos, type ChaosReport } from '../scripts/chaos/load.js';
import { SEARCH_ATTRIBUTES } from '../infra/temporal/contracts/job.js';
import { checkTemporalSetup, setupTemporal } from '../infra/temporal/setup.js';
import { query } from '../stack/postgres.js';
import { CLUSTER_SERVICES } from '../stack/temporal-cluster.js';
import { tempDir } from './support/stack.js';

let stack: ChaosStack;
let connection: Connection;
const log: string[] = [];

beforeAll(async () => {
  stack = await startChaosStack(tempDir('stupa-prod-'), { temporal: 'cluster' });
  connection = await Connection.connect({ address: stack.env.TEMPORAL_ADDRESS! });
}, 300_000);

afterAll(async () => {
  await connection?.close();
  await stack?.stop();
}, 120_000);

// Membership roles in cluster_membership (Temporal's persistence.ServiceType).
const ROLES: Record<string, string> = { '1': 'frontend', '2': 'history', '3': 'matching', '4': 'worker' };

/** The services that have joined the ring and not expired, by kind, from PostgreSQL itself. */
async function liveMembers(): Promise<Record<string, number>> {
  const rows = await query(
    stack.temporalCluster!.postgresPort,
    'SELECT role, count(DISTINCT rpc_port) FROM cluster_membership WHERE record_expiry > now() GROUP BY role ORDER BY role',
    'temporal',
  );
  return Object.fromEntries(
    rows
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [role, n] = line.split('|');
        return [ROLES[role!] ?? role!, Number(n)];
      }),
  );
}

test('each service is a process of its own on PostgreSQL, with two of history and matching in the ring', async () => {
  const cluster = stack.temporalCluster!;
  const pids = CLUSTER_SERVICES.map((name) => cluster.processes.get(name)!.current().pid);
  expect(new Set(pids).size).toBe(CLUSTER_SERVICES.length);
  expect(cluster.processes.get('postgres')!.current().running()).toBe(true);
  expect(await liveMembers()).toEqual({ frontend: 1, history: 2, matching: 2, worker: 1 });
  // The schema is the newest temporal-sql-tool carries, recorded by it.
  expect(await query(cluster.postgresPort, 'SELECT curr_version FROM schema_version', 'temporal')).toMatch(/^1\.\d+$/);
  expect(await query(cluster.postgresPort, 'SELECT curr_version FROM schema_version', 'temporal_visibility')).toMatch(/^1\.\d+$/);
});

test('the stack set up its namespace and search attributes, and setting up again changes nothing', async () => {
  expect(stack.temporalCluster!.setup).toEqual({ namespaceCreated: true, searchAttributesAdded: [...SEARCH_ATTRIBUTES] });
  await checkTemporalSetup(connection, 'stupa');
  const ns = await connection.workflowService.describeNamespace({ namespace: 'stupa' });
  expect(Number(ns.config?.workflowExecutionRetentionTtl?.seconds)).toBe(7 * 24 * 3600);
  expect(await setupTemporal(connection, { namespace: 'stupa', retentionDays: 7 })).toEqual({
    namespaceCreated: false,
    searchAttributesAdded: [],
  });
});

test('a namespace an operator set up by hand is taken as it is', async () => {
  const namespace = `by-hand-${Date.now()}`;
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(3 * 24 * 3600 * 1000) });
  // Both frontends and history see a new namespace only after their cache refreshes.
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(SEARCH_ATTRIBUTES.map((name) => [name, 2 /* Keyword */])),
      });
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  expect(await setupTemporal(connection, { namespace, retentionDays: 7 })).toEqual({ namespaceCreated: false, searchAttributesAdded: [] });
  const ns = await connection.workflowService.describeNamespace({ namespace });
  expect(Number(ns.config?.workflowExecutionRetentionTtl?.seconds)).toBe(3 * 24 * 3600);
}, 90_000);

let report: ChaosReport;

test('under a mixed load, killing each service and stopping PostgreSQL loses nothing', async () => {
  report = await runChaos(stack, (line) => log.push(line));
  // Shown when it fails, and in the run's output for the measurements (docs/measurements.md).
  console.log([...log, report.summary, `slowest: ${report.slowest}`, JSON.stringify(report.rows, null, 1)].join('\n'));
  expect(report.rows.map((r) => r.fault)).toEqual([
    'temporal history',
    'temporal matching',
    'temporal frontend',
    'temporal worker service',
    'postgres',
  ]);
  expect(report.problems).toEqual([]);
  expect(report.wrong).toEqual([]);
  expect(report.healed).toEqual([]);
  // Each killed piece was started again by the stack, and the ring is whole again.
  for (const name of ['history-1', 'matching-1', 'frontend', 'worker', 'postgres'])
    expect(stack.temporalCluster!.processes.get(name)!.restarts()).toBeGreaterThanOrEqual(1);
  expect(await liveMembers()).toEqual({ frontend: 1, history: 2, matching: 2, worker: 1 });
}, 900_000);

test("operators find the jobs by Cid, UserId, FolderId and IpnsName in PostgreSQL's visibility", async () => {
  expect(report).toBeDefined();
  const client = new Client({ connection, namespace: 'stupa' });
  const ids = async (q: string) => {
    const found: string[] = [];
    for await (const wf of client.workflow.list({ query: q })) found.push(wf.workflowId);
    return found;
  };
  const { userId, largeFolderId, ipnsName, waited } = report.made;
  // Pins that waited for their origin each ran as a workflow (`pin:<cid>:<user>`).
  expect(waited.length).toBeGreaterThan(0);
  for (const cid of waited) expect(await ids(`Cid = "${cid}" AND UserId = "${userId}"`)).toEqual([`pin:${cid}:${userId}`]);
  expect((await ids(`UserId = "${userId}"`)).length).toBeGreaterThan(waited.length);
  expect(await ids(`FolderId = "${largeFolderId}"`)).not.toEqual([]);
  expect(await ids(`IpnsName = "${ipnsName}"`)).not.toEqual([]);
});

test('started again on its data, the production shape sets up nothing and still has every job', async () => {
  expect(report).toBeDefined();
  const temporal = stack.engines.find((e) => e.name === 'temporal')!;
  await temporal.stop();
  await temporal.start();
  expect(stack.temporalCluster!.setup).toEqual({ namespaceCreated: false, searchAttributesAdded: [] });
  expect(await liveMembers()).toEqual({ frontend: 1, history: 2, matching: 2, worker: 1 });
  // Histories and visibility live in PostgreSQL: the waited pins' workflows are there, completed.
  const { userId, waited } = report.made;
  const again = await Connection.connect({ address: stack.env.TEMPORAL_ADDRESS! });
  try {
    const client = new Client({ connection: again, namespace: 'stupa' });
    for (const cid of waited) {
      const described = await client.workflow.getHandle(`pin:${cid}:${userId}`).describe();
      expect(described.status.name).toBe('COMPLETED');
    }
  } finally {
    await again.close();
  }
}, 180_000);
