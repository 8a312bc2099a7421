// The edge (Caddy, stack/edge.ts) as the one public entry: what reaches Kubo's gateway
// (recorded by a relay between the edge and Kubo), bytes metered from the edge's reports and
// 429 past the plan, the REST API and S3 through it, an API process stopped and the edge
// killed under load, and TLS from a local CA. The gateway's and its access rules' own cases run
// through the edge in gateway-edge.test.ts and gateway-access-edge.test.ts.
import fs from 'node:fs';
import https from 'node:https';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { EDGE_ANSWER_TTL_MS } from '../infra/constants.js';
import { API_KEEPALIVE_MS, EDGE_PURGE_PATH, EDGE_SECRET_HEADER, EDGE_UPSTREAM_KEEPALIVE_MS } from '../edge/protocol.js';
import { edgeRootCa, startEdgedApi, type EdgedApi } from './support/edge.js';
import { recordingKubo } from './support/kubo-relay.js';
import { hostRequest, type HostReply } from './support/host-request.js';
import { s3Client } from './support/s3.js';
import { call, createUser, plansFile, type TestUser } from './support/stack.js';
import { eventually } from './support/worker.js';

type Reply = HostReply;

/** A request to a port on 127.0.0.1 with the given Host, as a client that wants JSON. */
const request = (port: number, host: string, path: string, headers: Record<string, string> = {}) =>
  hostRequest(port, host, path, { headers: { Accept: 'application/json', ...headers } });

async function account(edged: EdgedApi, plan = 'dharma'): Promise<{ user: TestUser; slug: string }> {
  const user = await createUser(edged.api, plan);
  return { user, slug: (await edged.api.deps.db.users.get(user.userId))!.gatewaySlug! };
}

/** Uploads through the edge's REST API. */
async function upload(edged: EdgedApi, user: TestUser, content: string | Buffer): Promise<{ cid: string; uris: { gateway: string } }> {
  const form = new FormData();
  form.append('file', new Blob([content]), 'f.bin');
  const res = await fetch(`${edged.urls.api}/upload/new`, { method: 'POST', headers: { 'X-Api-Key': user.apiKey }, body: form });
  expect(res.status).toBe(201);
  return (await res.json()) as { cid: string; uris: { gateway: string } };
}

const read = (edged: EdgedApi, slug: string, path: string, headers: Record<string, string> = {}) =>
  request(edged.ports.gateway, `${slug}.localhost:${edged.ports.gateway}`, path, headers);

describe('through the edge', () => {
  let edged: EdgedApi;
  let kubo: Awaited<ReturnType<typeof recordingKubo>>;

  beforeAll(async () => {
    kubo = await recordingKubo();
    edged = await startEdgedApi({ PLANS_FILE: plansFile({ dharma: { gatewayBandwidthMB: 1 } }) }, { kuboGateway: kubo.url });
  });
  afterAll(async () => {
    await edged?.close();
    await kubo?.close();
  });

  test("a read the account may not make never reaches Kubo; a reader's token and the edge's own headers never do", async () => {
    const { user, slug } = await account(edged);
    const other = await account(edged);
    // Larger than the API keeps in memory (api/answers.ts): its bytes come from Kubo by the edge.
    const mine = Buffer.alloc(100 * 1024, 'm');
    const { cid } = await upload(edged, user, mine);
    const theirs = (await upload(edged, other.user, 'theirs')).cid;
    const token = (await call(edged.api, 'POST', '/gateway-tokens', { key: user.apiKey, body: { name: 'site' } })).body.token as string;
    await call(edged.api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { tokenRequired: true } });
    kubo.seen.length = 0;

    expect((await read(edged, slug, `/ipfs/${theirs}?token=${token}`)).status).toBe(410);
    const refused = await read(edged, slug, `/ipfs/${cid}`);
    expect([refused.status, JSON.parse(refused.body.toString()).error.reason]).toEqual([401, 'UNAUTHORIZED']);
    expect(kubo.seen).toEqual([]);

    // A reader cannot choose what the edge asks Kubo for, nor pose as the edge.
    const forged = await read(edged, slug, `/ipfs/${cid}?token=${token}`, {
      'X-Stupa-Path': `/ipfs/${theirs}`,
      'X-Stupa-Account': other.user.userId,
    });
    expect([forged.status, forged.body.equals(mine)]).toEqual([200, true]);
    expect(kubo.seen.map((s) => s.url.replace(/\?$/, ''))).toEqual([`/ipfs/${cid}`]);
    const headers = Object.keys(kubo.seen[0]!.headers);
    expect(headers.filter((h) => /^x-stupa|^x-gateway-token|^cookie|^authorization/.test(h))).toEqual([]);

    // The reader's address is the connection's: a forged X-Forwarded-For does not pass an allowlist.
    await call(edged.api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { tokenRequired: false, ipAllowlist: ['10.0.0.0/8'] } });
    const spoofed = await read(edged, slug, `/ipfs/${cid}`, { 'X-Forwarded-For': '10.1.2.3' });
    expect([spoofed.status, JSON.parse(spoofed.body.toString()).error.reason]).toEqual([403, 'IP_NOT_ALLOWED']);
    // Nor can anyone but the edge ask for a decision.
    const gatewayPort = new URL(edged.api.gatewayUrl).port;
    const asked = await request(Number(gatewayPort), `${slug}.localhost`, '/_edge/gateway', { 'X-Forwarded-Uri': `/ipfs/${cid}` });
    expect(asked.status).toBe(404);
  });

  test("every byte served counts against the account's bandwidth, from the edge's reports; past the plan, 429", async () => {
    const { user, slug } = await account(edged);
    const bytes = Buffer.alloc(400 * 1024, 7);
    const { cid } = await upload(edged, user, bytes);
    const sent = async () =>
      (await edged.api.deps.db.analytics.range(user.userId, '2000-01-01', '2999-12-31')).reduce((s, d) => s + (d.gatewayBytes ?? 0), 0);
    const whole = await read(edged, slug, `/ipfs/${cid}`);
    expect(Buffer.compare(whole.body, bytes)).toBe(0);
    expect((await read(edged, slug, `/ipfs/${cid}`, { Range: 'bytes=0-99' })).body.length).toBe(100);
    expect((await read(edged, slug, `/ipfs/${cid}`, { 'If-None-Match': `"${cid}"` })).status).toBe(304);
    await eventually(sent, (n) => n === bytes.length + 100, 10_000, 'bytes metered from the reports');
    // 400 KiB + 100 B so far; two more whole reads pass 1 MB.
    for (let i = 0; i < 2; i++) expect((await read(edged, slug, `/ipfs/${cid}`)).status).toBe(200);
    await eventually(sent, (n) => n === 3 * bytes.length + 100, 10_000, 'bytes metered from the reports');
    const limited = await read(edged, slug, `/ipfs/${cid}`);
    expect([limited.status, JSON.parse(limited.body.toString()).error.reason]).toEqual([429, 'GATEWAY_BANDWIDTH_LIMIT']);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await sent()).toBe(3 * bytes.length + 100);
  });

  test('a small answer: read from Kubo once by the API, then answered by the edge itself for a second, metered, and forgotten when the rules change', async () => {
    const { user, slug } = await account(edged, 'bodhi');
    const text = 'small and read often';
    const { cid } = await upload(edged, user, text);
    const sent = async () =>
      (await edged.api.deps.db.analytics.range(user.userId, '2000-01-01', '2999-12-31')).reduce((s, d) => s + (d.gatewayBytes ?? 0), 0);
    kubo.seen.length = 0;
    const first = await read(edged, slug, `/ipfs/${cid}`);
    const again = await read(edged, slug, `/ipfs/${cid}`);
    for (const answer of [first, again]) {
      expect([answer.status, answer.body.toString(), answer.headers.etag]).toEqual([200, text, `"${cid}"`]);
      expect(answer.headers['cache-control']).toContain('immutable');
      expect(answer.headers['x-stupa-keep']).toBeUndefined();
    }
    expect([first.headers['cache-status'], again.headers['cache-status']]).toEqual([undefined, 'stupa-edge; hit']);
    expect(again.headers['content-length']).toBe(String(text.length));
    // Another reader's address, token or Origin is another decision: not this answer.
    const withOrigin = await read(edged, slug, `/ipfs/${cid}`, { Origin: 'https://app.example.com' });
    expect([withOrigin.status, withOrigin.headers['cache-status']]).toEqual([200, undefined]);
    // A condition goes to the API, which answers it from its memory.
    const unchanged = await read(edged, slug, `/ipfs/${cid}`, { 'If-None-Match': `"${cid}"` });
    expect([unchanged.status, unchanged.headers['cache-status']]).toEqual([304, undefined]);
    // The edge never asked Kubo: the API did, once, and answered the rest from memory.
    expect(kubo.seen).toEqual([]);
    // A range is not kept: the edge serves it from Kubo.
    const ranged = await read(edged, slug, `/ipfs/${cid}`, { Range: 'bytes=0-4' });
    expect([ranged.status, ranged.body.toString()]).toEqual([206, 'small']);
    expect(kubo.seen.map((s) => s.headers.range)).toEqual(['bytes=0-4']);
    // Three whole answers: two from the API, the edge's own from its report, as the range's.
    await eventually(sent, (n) => n === 3 * text.length + 5, 10_000, 'bytes metered');

    // A second later the API is asked again.
    await new Promise((r) => setTimeout(r, EDGE_ANSWER_TTL_MS + 100));
    expect((await read(edged, slug, `/ipfs/${cid}`)).headers['cache-status']).toBeUndefined();
    expect((await read(edged, slug, `/ipfs/${cid}`)).headers['cache-status']).toBe('stupa-edge; hit');
    // A change of the account's rules is in force when it is confirmed: the edge forgot.
    expect((await call(edged.api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { ipAllowlist: ['10.0.0.0/8'] } })).status).toBe(
      200,
    );
    expect((await read(edged, slug, `/ipfs/${cid}`)).status).toBe(403);
    await call(edged.api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { ipAllowlist: [] } });
    expect((await read(edged, slug, `/ipfs/${cid}`)).status).toBe(200);
    // A deleted token opens nothing once its deletion is answered: neither the API, which
    // remembered it, nor the edge, which kept an answer made with it.
    const token = (await call(edged.api, 'POST', '/gateway-tokens', { key: user.apiKey, body: { name: 'kept' } })).body.token as string;
    await call(edged.api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { tokenRequired: true } });
    expect((await read(edged, slug, `/ipfs/${cid}`, { 'X-Gateway-Token': token })).status).toBe(200);
    expect((await read(edged, slug, `/ipfs/${cid}`, { 'X-Gateway-Token': token })).headers['cache-status']).toBe('stupa-edge; hit');
    expect((await call(edged.api, 'DELETE', `/gateway-tokens/${token.slice(0, 12)}`, { key: user.apiKey })).status).toBe(200);
    expect((await read(edged, slug, `/ipfs/${cid}`, { 'X-Gateway-Token': token })).status).toBe(401);
  });

  test("the edge's purge listener takes only the service's requests", async () => {
    const purge = async (headers: Record<string, string>, path = EDGE_PURGE_PATH) => {
      const res = await fetch(`${edged.env.EDGE_PURGE_URLS}${path}`, { method: 'POST', headers, body: 'usr_x' });
      const text = await res.text();
      return [res.status, text && (JSON.parse(text) as { error: { reason: string } }).error.reason];
    };
    expect(await purge({})).toEqual([403, 'EDGE_PURGE_REFUSED']);
    expect(await purge({ [EDGE_SECRET_HEADER]: 'not the secret' })).toEqual([403, 'EDGE_PURGE_REFUSED']);
    expect(await purge({ [EDGE_SECRET_HEADER]: edged.env.EDGE_SECRET }, '/elsewhere')).toEqual([404, 'EDGE_PURGE_REFUSED']);
    expect(await purge({ [EDGE_SECRET_HEADER]: edged.env.EDGE_SECRET })).toEqual([204, '']);
  });

  test('a large S3 upload the API refuses gets its error through the edge, and the next requests are answered', async () => {
    const { user } = await account(edged, 'bodhi');
    const s3 = s3Client(edged.api, user, { endpoint: `http://127.0.0.1:${edged.ports.s3}` });
    try {
      // Refused before its body is read (no signature): the API answers, then reads and drops the body.
      for (let i = 0; i < 2; i++) {
        const refused = await fetch(`http://127.0.0.1:${edged.ports.s3}/some-bucket/k`, {
          method: 'PUT',
          body: Buffer.alloc(20 * 1024 * 1024),
        });
        expect([refused.status, (await refused.text()).includes('<Code>AccessDenied</Code>')]).toEqual([403, true]);
        const bucket = `after-${i}-${Math.random().toString(36).slice(2, 8)}`;
        await s3.send(new CreateBucketCommand({ Bucket: bucket })); // not 503
      }
    } finally {
      s3.destroy();
    }
  });

  test("the REST API and S3 answer through the edge, and links name the account's gateway there", async () => {
    const { user, slug } = await account(edged, 'bodhi');
    const uploaded = await upload(edged, user, 'linked');
    expect(uploaded.uris.gateway).toBe(`http://${slug}.localhost:${edged.ports.gateway}/ipfs/${uploaded.cid}`);
    const profile = (await (await fetch(`${edged.urls.api}/user/profile`, { headers: { 'X-Api-Key': user.apiKey } })).json()) as {
      gatewayUrl: string;
    };
    expect(profile.gatewayUrl).toBe(`http://${slug}.localhost:${edged.ports.gateway}`);
    const unknown = await fetch(`${edged.urls.api}/no/such/route`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { reason: string } }).error.reason).toBe('NOT_FOUND');

    const s3 = s3Client(edged.api, user, { endpoint: `http://127.0.0.1:${edged.ports.s3}` });
    const bucket = `edge-${Math.random().toString(36).slice(2, 10)}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const body = Buffer.alloc(3 * 1024 * 1024, 'e');
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k.bin', Body: body }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'k.bin' }));
    expect(Buffer.compare(Buffer.from(await got.Body!.transformToByteArray()), body)).toBe(0);
    s3.destroy();

    // On-demand certificates only for the service's names: an account's gateway, a bucket.
    const gatewayPort = Number(new URL(edged.api.gatewayUrl).port);
    const ask = async (domain: string) => (await request(gatewayPort, 'localhost', `/_edge/tls-ask?domain=${domain}`)).status;
    expect(await ask(`${slug}.localhost`)).toBe(200);
    expect(await ask(`${bucket}.localhost`)).toBe(200);
    expect(await ask('nobodyhasthisslug.localhost')).toBe(404);
    expect(await ask('example.com')).toBe(404);
  });
});

/** Runs `one`, `concurrency` at a time, calling `midway` once `at` have started and going on
 * until `after` more have run since `midway` finished; each result says whether its request
 * started after that. A failed request waits 50 ms before the next, so an outage is not a
 * tight loop. */
async function underLoad(concurrency: number, one: () => Promise<number>, at: number, midway: () => Promise<void>, after: number) {
  const results: { status: number | string; after: boolean }[] = [];
  let started = 0;
  let done = false;
  let since = 0;
  let interrupted: Promise<void> | undefined;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (since < after) {
        if (++started === at) interrupted = midway().then(() => void (done = true));
        const isAfter = done;
        const status = await one().catch((err: Error & { code?: string }) => err.code ?? err.message);
        results.push({ status, after: isAfter });
        if (isAfter) since++;
        if (status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
    }),
  );
  await interrupted;
  return results;
}

test('two API processes behind the edge: one stops under load and every request, uploads too, is still answered', async () => {
  const edged = await startEdgedApi({ PLANS_FILE: plansFile({ dharma: { requestsPerMinute: 100_000 } }) }, { apis: 2 });
  try {
    const { user, slug } = await account(edged);
    const { cid } = await upload(edged, user, 'served by whichever process is up');
    // An upload too: a POST is never retried by the edge once sent, so it shows a connection
    // closed under it (what the drain, server.ts close, prevents).
    let n = 0;
    const one = async () => {
      const profile = await fetch(`${edged.urls.api}/user/profile`, { headers: { 'X-Api-Key': user.apiKey } });
      await profile.arrayBuffer();
      const content = await read(edged, slug, `/ipfs/${cid}`);
      const posted = await fetch(`${edged.urls.api}/upload/new`, {
        method: 'POST',
        headers: { 'X-Api-Key': user.apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ content: `rolling ${n++}`, name: 'rolling.txt' }),
      });
      await posted.arrayBuffer();
      const ok = profile.status === 200 && content.status === 200 && posted.status === 201;
      return ok ? 200 : profile.status * 1_000_000 + content.status * 1000 + posted.status;
    };
    // Stopped as a SIGTERM stops it: drained first (SHUTDOWN_DRAIN_MS), then closed.
    const results = await underLoad(16, one, 60, () => edged.apis[1]!.close({ drainMs: 5000 }).then(() => undefined), 200);
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    expect(results.length).toBeGreaterThan(260);
  } finally {
    await edged.close();
  }
}, 60_000);

/** Established TCP connections to a local port (its server's side), from /proc/net/tcp. */
function establishedTo(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return fs
    .readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[1]?.endsWith(`:${hexPort}`) && f[3] === '01').length;
}

test('the edge closes its idle connections to an API process before the process would', async () => {
  const edged = await startEdgedApi();
  try {
    const { user, slug } = await account(edged);
    const { cid } = await upload(edged, user, 'idle connections');
    // A gateway read's decision goes to the API's gateway port, which has no health checks that
    // would keep a connection busy.
    expect((await read(edged, slug, `/ipfs/${cid}`)).status).toBe(200);
    const gatewayPort = Number(new URL(edged.api.gatewayUrl).port);
    expect(establishedTo(gatewayPort)).toBeGreaterThanOrEqual(1);
    // Past the edge's idle time, before the API's: had the API closed first, a request sent as
    // it did would meet a reset, and Caddy does not resend a POST.
    await new Promise((r) => setTimeout(r, (EDGE_UPSTREAM_KEEPALIVE_MS + API_KEEPALIVE_MS) / 2 + 300));
    expect(establishedTo(gatewayPort)).toBe(0);
  } finally {
    await edged.close();
  }
}, 30_000);

test("every API process down: the edge answers 503 in each surface's error shape, with Retry-After", async () => {
  const edged = await startEdgedApi();
  try {
    await edged.api.close();
    const api = await request(edged.ports.api, `127.0.0.1:${edged.ports.api}`, '/user/profile?token=secret-in-query', {
      'X-Api-Key': 'stp_secret-in-header',
    });
    expect([api.status, api.headers['content-type'], api.headers['retry-after']]).toEqual([503, 'application/json; charset=utf-8', '5']);
    expect(JSON.parse(api.body.toString()).error.reason).toBe('DEPENDENCY_UNAVAILABLE');
    const gateway = await request(edged.ports.gateway, `someslug.localhost:${edged.ports.gateway}`, '/ipfs/bafkqaaa');
    expect([gateway.status, JSON.parse(gateway.body.toString()).error.reason]).toEqual([503, 'DEPENDENCY_UNAVAILABLE']);
    const s3 = await request(edged.ports.s3, `localhost:${edged.ports.s3}`, '/');
    expect([s3.status, s3.headers['content-type']]).toEqual([503, 'application/xml']);
    expect(s3.body.toString()).toContain('<Code>ServiceUnavailable</Code>');
    // The edge's log says why it answered 503 itself (the upstream refused the connection, or
    // none is up), without the request's credentials.
    const logged = await eventually(
      async () =>
        fs
          .readFileSync(edged.edge.process.logFile, 'utf8')
          .split('\n')
          .filter((l) => l.includes('"logger":"http.log.error'))
          .map((l) => JSON.parse(l) as { msg: string; request: Record<string, unknown> }),
      (errors) => errors.length >= 3,
      10_000,
      'the edge logging its three errors',
    );
    for (const e of logged) {
      expect(e.msg).toMatch(/connection refused|no upstreams available/);
      expect(e.request.headers).toBeUndefined();
    }
    expect(logged.map((e) => e.request.uri)).toContain('/user/profile');
    expect(fs.readFileSync(edged.edge.process.logFile, 'utf8')).not.toMatch(/secret-in-(query|header)/);
  } finally {
    await edged.edge.stop();
  }
}, 30_000);

test('the edge killed under load and started again: reads resume and are metered', async () => {
  const edged = await startEdgedApi();
  try {
    const { user, slug } = await account(edged);
    const { cid } = await upload(edged, user, 'x'.repeat(1000));
    const results = await underLoad(
      4,
      async () => (await read(edged, slug, `/ipfs/${cid}`)).status,
      100,
      async () => {
        process.kill(edged.edge.process.pid, 'SIGKILL');
        await new Promise((r) => setTimeout(r, 300));
        await edged.restartEdge();
      },
      200,
    );
    // While it was down, connections were refused (or cut); once it is back, every read is served.
    expect(results.filter((r) => r.status !== 200 && r.status !== 'ECONNREFUSED' && r.status !== 'ECONNRESET')).toEqual([]);
    expect(results.filter((r) => r.status !== 200).length).toBeGreaterThan(0);
    expect(results.filter((r) => r.after && r.status !== 200)).toEqual([]);
    // Reads after the restart are served and metered (the report connection is made again).
    const before = await edged.api.deps.db.analytics.range(user.userId, '2000-01-01', '2999-12-31');
    const counted = () =>
      edged.api.deps.db.analytics
        .range(user.userId, '2000-01-01', '2999-12-31')
        .then((d) => d.reduce((s, x) => s + (x.gatewayBytes ?? 0), 0));
    const base = before.reduce((s, x) => s + (x.gatewayBytes ?? 0), 0);
    for (let i = 0; i < 5; i++) expect((await read(edged, slug, `/ipfs/${cid}`)).status).toBe(200);
    await eventually(counted, (n) => n >= base + 5000, 15_000, 'reads after the restart metered');
  } finally {
    await edged.close();
  }
}, 60_000);

test('TLS from a local CA: a client that trusts it reads the API and an account gateway; a wrong name is refused', async () => {
  const tls = { mode: 'internal' as const, apiHost: 'api.stupa.test', gatewayDomain: 'gw.stupa.test', s3Domain: 's3.stupa.test' };
  const edged = await startEdgedApi({}, { tls });
  try {
    const { user, slug } = await account(edged);
    const ca = await edgeRootCa(edged);
    const get = (
      servername: string,
      path: string,
      options: { ca?: Buffer; method?: string; body?: string; headers?: Record<string, string> } = {},
    ) =>
      new Promise<Reply>((resolve, reject) => {
        const req = https.request(
          {
            host: '127.0.0.1',
            port: edged.ports.api,
            servername,
            path,
            method: options.method ?? 'GET',
            headers: { Host: `${servername}:${edged.ports.api}`, ...options.headers },
            ...(options.ca ? { ca: options.ca } : {}),
          },
          (res) => {
            const parts: Buffer[] = [];
            res.on('data', (c: Buffer) => parts.push(c));
            res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
          },
        );
        req.on('error', reject);
        req.end(options.body);
      });
    expect((await get('api.stupa.test', '/readyz', { ca })).status).toBe(200);
    const made = await get('api.stupa.test', '/upload/new', {
      ca,
      method: 'POST',
      body: JSON.stringify({ content: 'over tls', name: 't.txt' }),
      headers: { 'X-Api-Key': user.apiKey, 'Content-Type': 'application/json' },
    });
    expect(made.status).toBe(201);
    const file = JSON.parse(made.body.toString()) as { cid: string; uris: { gateway: string } };
    expect(file.uris.gateway).toBe(`https://${slug}.gw.stupa.test:${edged.ports.api}/ipfs/${file.cid}`);
    const content = await get(`${slug}.gw.stupa.test`, `/ipfs/${file.cid}`, { ca });
    expect([content.status, content.body.toString()]).toEqual([200, 'over tls']);
    // Not trusted without the CA; no certificate for a name that is not the service's.
    await expect(get('api.stupa.test', '/readyz')).rejects.toThrow(/certificate/);
    await expect(get('evil.example', '/readyz', { ca })).rejects.toThrow();
  } finally {
    await edged.close();
  }
}, 60_000);
