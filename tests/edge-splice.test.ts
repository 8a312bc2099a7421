// The edge's relay of Kubo's answers (edge/caddy/splice.go): a large read's bytes move from
// Kubo's socket to the reader's with splice(2), never read into the edge. What the edge process
// read and wrote with read/write calls is its rchar/wchar in /proc (splice counts in neither):
// through Caddy's reverse proxy, an 8 MiB read added 8 MiB to each.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { startKubo } from '../stack/kubo.js';
import { freePorts } from '../stack/ports.js';
import { edgeRootCa, startEdgedApi, type EdgedApi } from './support/edge.js';
import { hostRequest, type HostReply } from './support/host-request.js';
import { recordingRelay } from './support/kubo-relay.js';
import { createUser, type TestUser } from './support/stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let edged: EdgedApi;
let worker: WorkerProcess;
let user: TestUser;
let slug: string;
const body = randomBytes(8 * 1024 * 1024);
let cid: string;

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: testTaskQueue() };
  [edged, worker] = await Promise.all([startEdgedApi(env), startWorkerProcess(env)]);
  user = await createUser(edged.api, 'karma');
  slug = (await edged.api.deps.db.users.get(user.userId))!.gatewaySlug!;
  const form = new FormData();
  form.append('file', new Blob([body]), 'big.bin');
  const res = await fetch(`${edged.api.url}/upload/new`, { method: 'POST', headers: { 'X-Api-Key': user.apiKey }, body: form });
  expect(res.status).toBe(201);
  cid = ((await res.json()) as { cid: string }).cid;
});
afterAll(async () => {
  await Promise.all([edged?.close(), worker?.kill()]);
});

const gw = (path: string, headers: Record<string, string> = {}): Promise<HostReply> =>
  hostRequest(edged.ports.gateway, `${slug}.localhost:${edged.ports.gateway}`, path, { headers });

/** The bytes the edge process has moved with read and write calls so far. */
function edgeCopied(): number {
  const io = fs.readFileSync(`/proc/${edged.edge.process.pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)![1]);
  return field('rchar') + field('wchar');
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

test("the bytes relayed count against the account's bandwidth (the account's first reads)", async () => {
  const sent = async () =>
    (await edged.api.deps.db.analytics.range(user.userId, '2000-01-01', '2999-12-31')).reduce((s, d) => s + (d.gatewayBytes ?? 0), 0);
  await gw(`/ipfs/${cid}`);
  await gw(`/ipfs/${cid}`, { Range: 'bytes=100-199' });
  const expected = body.length + 100;
  const deadline = Date.now() + 10_000;
  while ((await sent()) < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  await new Promise((r) => setTimeout(r, 1500));
  expect(await sent()).toBe(expected);
});

test("a large read is Kubo's bytes and headers, moved without the edge reading them", async () => {
  await gw(`/ipfs/${cid}`, { Range: 'bytes=0-0' }); // the decision's connections and caches warm
  const before = edgeCopied();
  const res = await gw(`/ipfs/${cid}`);
  const copied = edgeCopied() - before;
  expect(res.status).toBe(200);
  expect(sha(res.body)).toBe(sha(body));
  expect(res.headers['content-length']).toBe(String(body.length));
  expect(res.headers.etag).toBe(`"${cid}"`);
  expect(res.headers['x-ipfs-path']).toBe(`/ipfs/${cid}`);
  expect(res.headers['cache-control']).toBe('public, max-age=29030400, immutable');
  expect(res.headers.via).toBe('1.1 Caddy');
  // The request, the decision's exchange with the API, the answer's head and the access log.
  expect(copied).toBeLessThan(256 * 1024);

  const first = 3 * 1024 * 1024 + 17;
  const last = 6 * 1024 * 1024;
  const start = edgeCopied();
  const slice = await gw(`/ipfs/${cid}`, { Range: `bytes=${first}-${last}` });
  expect(edgeCopied() - start).toBeLessThan(256 * 1024);
  expect([slice.status, slice.headers['content-range']]).toEqual([206, `bytes ${first}-${last}/${body.length}`]);
  expect(slice.body.equals(body.subarray(first, last + 1))).toBe(true);
});

test('a reader that goes away mid-body leaves the next reads whole', async () => {
  await new Promise<void>((resolve, reject) => {
    const req = http.get(
      { host: '127.0.0.1', port: edged.ports.gateway, path: `/ipfs/${cid}`, headers: { Host: `${slug}.localhost` } },
      (res) => {
        expect(res.statusCode).toBe(200);
        res.on('error', () => undefined);
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      },
    );
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
  });
  // The relay's kept connection to Kubo was mid-answer: it must not be used again.
  for (let i = 0; i < 3; i++) {
    const res = await gw(`/ipfs/${cid}`);
    expect([res.status, sha(res.body)]).toEqual([200, sha(body)]);
  }
});

test('over TLS, HTTP/1.1 and HTTP/2, the relay copies the same bytes (TLS encrypts in the edge)', async () => {
  const tls = { mode: 'internal' as const, apiHost: 'api.stupa.test', gatewayDomain: 'gw.stupa.test', s3Domain: 's3.stupa.test' };
  const secure = await startEdgedApi({ TEMPORAL_TASK_QUEUE: testTaskQueue() }, { tls });
  try {
    const owner = await createUser(secure.api, 'karma');
    const ownerSlug = (await secure.api.deps.db.users.get(owner.userId))!.gatewaySlug!;
    const form = new FormData();
    form.append('file', new Blob([body.subarray(0, 3 * 1024 * 1024)]), 'tls.bin');
    const made = await fetch(`${secure.api.url}/upload/new`, { method: 'POST', headers: { 'X-Api-Key': owner.apiKey }, body: form });
    const { cid: tlsCid } = (await made.json()) as { cid: string };
    const ca = await edgeRootCa(secure);
    const servername = `${ownerSlug}.gw.stupa.test`;
    const overH1 = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
      const req = https.get(
        { host: '127.0.0.1', port: secure.ports.api, servername, path: `/ipfs/${tlsCid}`, headers: { Host: servername }, ca },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(parts) }));
        },
      );
      req.on('error', reject);
    });
    expect([overH1.status, sha(overH1.body)]).toEqual([200, sha(body.subarray(0, 3 * 1024 * 1024))]);
    const session = http2.connect(`https://${servername}:${secure.ports.api}`, { ca, host: '127.0.0.1', servername });
    try {
      const overH2 = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
        const stream = session.request({ ':path': `/ipfs/${tlsCid}` });
        let status = 0;
        const parts: Buffer[] = [];
        stream.on('response', (headers) => (status = Number(headers[':status'])));
        stream.on('data', (c: Buffer) => parts.push(c));
        stream.on('end', () => resolve({ status, body: Buffer.concat(parts) }));
        stream.on('error', reject);
      });
      expect([overH2.status, sha(overH2.body)]).toEqual([200, sha(body.subarray(0, 3 * 1024 * 1024))]);
    } finally {
      session.close();
    }
  } finally {
    await secure.close();
  }
}, 60_000);

test('with several Kubo gateways, the relay asks each in turn once: a peer without the content answers 404 and the next serves it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-splice-kubo2-'));
  const [api, gateway, swarm] = (await freePorts(3)) as [number, number, number];
  const empty = await startKubo({
    dataDir: path.join(dir, 'kubo'),
    logDir: path.join(dir, 'logs'),
    ports: { api, gateway, swarm },
    name: 'kubo-2',
  });
  const lacking = await recordingRelay(empty.gatewayUrl);
  const peers = await startEdgedApi(
    { TEMPORAL_TASK_QUEUE: testTaskQueue() },
    { kuboGateways: [lacking.url, process.env.STUPA_TEST_KUBO_GATEWAY_URL!] },
  );
  try {
    const owner = await createUser(peers.api, 'karma');
    const ownerSlug = (await peers.api.deps.db.users.get(owner.userId))!.gatewaySlug!;
    const form = new FormData();
    form.append('file', new Blob([body.subarray(0, 1024 * 1024)]), 'peers.bin');
    const made = await fetch(`${peers.api.url}/upload/new`, { method: 'POST', headers: { 'X-Api-Key': owner.apiKey }, body: form });
    const { cid: peersCid } = (await made.json()) as { cid: string };
    const res = await hostRequest(peers.ports.gateway, `${ownerSlug}.localhost:${peers.ports.gateway}`, `/ipfs/${peersCid}`);
    expect([res.status, sha(res.body)]).toEqual([200, sha(body.subarray(0, 1024 * 1024))]);
    // Asked once, by the relay (Caddy's proxy, had the read fallen to it, would have asked again).
    expect(lacking.seen.filter((s) => s.url.startsWith(`/ipfs/${peersCid}`)).length).toBe(1);
  } finally {
    await peers.close();
    await lacking.close();
    await empty.stop();
  }
}, 60_000);
