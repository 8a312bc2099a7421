// The test stack itself, checked for real: every piece answers and does its job, and Kubo
// fetches blocks from a peer it was told to connect to (what pinning by CID relies on,
// with the DHT off).
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import mongoose from 'mongoose';
import { startFerretDb } from '../stack/ferretdb.js';
import { startKubo, type KuboNode } from '../stack/kubo.js';
import { freePorts } from '../stack/ports.js';
import { startTemporal } from '../stack/temporal.js';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run through stack/run-tests.ts (npm test)`);
  return value;
}

const kuboApi = () => env('STUPA_TEST_KUBO_API_URL');
const HELLO_CID = 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e';

async function kubo(apiUrl: string, command: string, params: Record<string, string> = {}, body?: FormData): Promise<Response> {
  const query = new URLSearchParams(params).toString();
  return fetch(`${apiUrl}/api/v0/${command}${query ? `?${query}` : ''}`, { method: 'POST', body, signal: AbortSignal.timeout(30_000) });
}

async function addBytes(apiUrl: string, bytes: Uint8Array, pin = true): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([bytes]), 'data');
  const res = await kubo(apiUrl, 'add', { pin: String(pin) }, form);
  expect(res.status).toBe(200);
  return ((await res.json()) as { Hash: string }).Hash;
}

async function cat(apiUrl: string, cid: string): Promise<Buffer> {
  const res = await kubo(apiUrl, 'cat', { arg: cid });
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

describe('Kubo', () => {
  test('adds with the unixfs-v1-2025 profile and cats the bytes back', async () => {
    const cid = await addBytes(kuboApi(), new TextEncoder().encode('hello world'));
    expect(cid).toBe(HELLO_CID);
    expect((await cat(kuboApi(), cid)).toString()).toBe('hello world');
  });

  test('serves the content on its gateway', async () => {
    await addBytes(kuboApi(), new TextEncoder().encode('hello world'));
    const res = await fetch(`${env('STUPA_TEST_KUBO_GATEWAY_URL')}/ipfs/${HELLO_CID}`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello world');
  });

  describe('with a second, independent node', () => {
    let dir: string;
    let second: KuboNode;

    beforeAll(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-kubo2-'));
      const [api, gateway, swarm] = (await freePorts(3)) as [number, number, number];
      second = await startKubo({
        dataDir: path.join(dir, 'kubo'),
        logDir: path.join(dir, 'logs'),
        ports: { api, gateway, swarm },
        name: 'kubo-2',
      });
    });

    afterAll(async () => {
      await second?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test('fetches over bitswap content only that node has, once connected to it', async () => {
      // 3 MB of fresh random bytes: several 1 MiB blocks nobody else can have.
      const bytes = crypto.randomBytes(3_000_000);
      const cid = await addBytes(second.apiUrl, bytes);
      const local = await kubo(kuboApi(), 'block/stat', { arg: cid, offline: 'true' });
      expect(local.status).not.toBe(200);

      const connect = await kubo(kuboApi(), 'swarm/connect', { arg: second.swarmAddress });
      expect(connect.status).toBe(200);
      expect(Buffer.compare(await cat(kuboApi(), cid), bytes)).toBe(0);
    });
  });
});

test('Cluster pins a CID on its Kubo', async () => {
  const clusterApi = env('STUPA_TEST_CLUSTER_API_URL');
  // Added unpinned, so the pin is Cluster's doing.
  const cid = await addBytes(kuboApi(), crypto.randomBytes(1000), false);
  const pin = await fetch(`${clusterApi}/pins/${cid}`, { method: 'POST' });
  expect(pin.status).toBe(200);

  let statuses: string[] = [];
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const res = await fetch(`${clusterApi}/pins/${cid}`);
    expect(res.status).toBe(200);
    const info = (await res.json()) as { peer_map: Record<string, { status: string }> };
    statuses = Object.values(info.peer_map).map((p) => p.status);
    if (statuses.length > 0 && statuses.every((s) => s === 'pinned')) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(statuses).toEqual(['pinned']);
  const pins = await kubo(kuboApi(), 'pin/ls', { arg: cid, type: 'recursive' });
  expect(pins.status).toBe(200);
});

test('Temporal answers and has the Cid and UserId search attributes', async () => {
  const connection = await Connection.connect({ address: env('STUPA_TEST_TEMPORAL_ADDRESS') });
  try {
    await connection.healthService.check({});
    const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    // 2 = INDEXED_VALUE_TYPE_KEYWORD
    expect(res.customAttributes).toMatchObject({ Cid: 2, UserId: 2 });
  } finally {
    await connection.close();
  }
});

test('MongoDB answers ping and round-trips a document', async () => {
  const conn = await mongoose.createConnection(env('STUPA_TEST_MONGODB_URI')).asPromise();
  try {
    expect(await conn.db!.admin().ping()).toMatchObject({ ok: 1 });
    const things = conn.db!.collection(`stack_test_${crypto.randomBytes(4).toString('hex')}`);
    const { insertedId } = await things.insertOne({ name: 'stupa', n: 42 });
    expect(await things.findOne({ _id: insertedId })).toEqual({ _id: insertedId, name: 'stupa', n: 42 });
    await things.drop();
  } finally {
    await conn.close();
  }
});

// STACK_DB_SYNC reaches both SQLite servers (stack/db-sync.ts): FerretDB by its
// URL's pragma, Temporal by the CLI's, which also puts its database on a write-ahead log (its
// -wal file is there while it runs; SQLite's default journal leaves none).
test('FerretDB and Temporal start with the SQLite sync asked for, Temporal on a write-ahead log', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-sync-'));
  const [mongoPort, frontend, http, metrics] = await freePorts(4);
  const cmdline = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const ferret = await startFerretDb({ dataDir: path.join(dir, 'ferretdb'), logDir: dir, port: mongoPort!, sync: 'full' });
  const temporal = await startTemporal({
    dataDir: path.join(dir, 'temporal'),
    logDir: dir,
    ports: { frontend: frontend!, http: http!, metrics: metrics! },
  });
  try {
    expect(cmdline(ferret.pid).find((a) => a.startsWith('--sqlite-url='))).toMatch(/\?_pragma=synchronous\(full\)$/);
    const pragmas = cmdline(temporal.pid).filter((_, i, all) => all[i - 1] === '--sqlite-pragma');
    expect(pragmas).toEqual(['journal_mode=wal', 'synchronous=normal']);
    expect(fs.existsSync(path.join(dir, 'temporal', 'temporal.db-wal'))).toBe(true);
    const conn = await mongoose.createConnection(ferret.uri).asPromise();
    try {
      const things = conn.db!.collection('sync_test');
      const { insertedId } = await things.insertOne({ n: 1 });
      expect(await things.findOne({ _id: insertedId })).toEqual({ _id: insertedId, n: 1 });
    } finally {
      await conn.close();
    }
  } finally {
    await Promise.all([ferret.stop(), temporal.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

// The stack's FerretDB is built with patches (stack/patches/ferretdb/); the first makes reads,
// updates and deletes by `_id` use the `_id` index instead of reading the whole table, which
// every hot path of the service relies on (infra/db/by-id.ts). Its explain output shows
// SQLite's own query plan. It does not apply when the tests run on a user's MongoDB
// (MONGODB_URI set; run-tests.ts then starts no FerretDB).
const onStackFerretDb = !process.env.MONGODB_URI;
(onStackFerretDb ? test : test.skip)('FerretDB finds a document by _id through the index', async () => {
  const conn = await mongoose.createConnection(env('STUPA_TEST_MONGODB_URI')).asPromise();
  try {
    const things = conn.db!.collection<{ _id: string }>(`stack_test_${crypto.randomBytes(4).toString('hex')}`);
    await things.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: `doc-${i}` })));
    const explained = (await things.find({ _id: 'doc-7' }).explain()) as {
      serverInfo?: { ferretdbVersion?: string };
      queryPlanner?: { Plan?: string[] };
    };
    expect(explained.serverInfo?.ferretdbVersion).toBe('v1.24.2');
    const plan = (explained.queryPlanner?.Plan ?? []).join('\n');
    expect(plan).toMatch(/SEARCH .* USING INDEX .*__id_/);
    expect(plan).not.toMatch(/\bSCAN\b/);
    await things.drop();
  } finally {
    await conn.close();
  }
});

test('free ports come from below the ephemeral range, and none is handed out twice', async () => {
  const [ephemeralLow] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const picked = await freePorts(300);
  expect(new Set(picked).size).toBe(300);
  for (const port of picked) expect(port).toBeLessThan(Math.min(ephemeralLow!, 17_000));
  // The kernel's own choices (what a server on port 0 or an outgoing connection gets) are in
  // the ephemeral range, so they never meet a picked port.
  const kernels = await Promise.all(
    Array.from(
      { length: 20 },
      () =>
        new Promise<number>((resolve) => {
          const server = net.createServer().listen(0, '127.0.0.1', () => {
            const { port } = server.address() as net.AddressInfo;
            server.close(() => resolve(port));
          });
        }),
    ),
  );
  for (const port of kernels) expect(port).toBeGreaterThanOrEqual(ephemeralLow!);
  expect(picked.filter((p) => kernels.includes(p))).toEqual([]);
  // More picks in the same process never repeat one.
  const more = await freePorts(300);
  expect(more.filter((p) => picked.includes(p))).toEqual([]);
});
