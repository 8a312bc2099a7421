import zlib from 'node:zlib';
import type { ApiServer } from '../api/server.js';
import { RATE_WINDOW_MS } from '../infra/constants.js';
import { call, createUser, errorReason, plansFile, startTestApi, type TestUser } from './support/stack.js';
import { rawExchange } from './support/raw.js';

let api: ApiServer;
let user: TestUser;

beforeAll(async () => {
  api = await startTestApi({ PLANS_FILE: plansFile({ tiny: { requestsPerMinute: 5 } }), JSON_BODY_LIMIT: '2kb' });
  user = await createUser(api);
});
afterAll(() => api.close());

describe('authentication', () => {
  test('X-Api-Key and Authorization: Bearer both work', async () => {
    expect((await call(api, 'GET', '/apikeys', { key: user.apiKey })).status).toBe(200);
    const bearer = await call(api, 'GET', '/apikeys', { headers: { Authorization: `Bearer ${user.apiKey}` } });
    expect(bearer.status).toBe(200);
    expect(bearer.body[0].keyPrefix).toBe(user.keyPrefix);
  });

  test.each([
    ['no credentials', {}],
    ['an empty X-Api-Key', { 'X-Api-Key': '' }],
    ['a malformed key', { 'X-Api-Key': 'hello' }],
    ['an unknown well-formed key', { 'X-Api-Key': `stp_${'A'.repeat(32)}` }],
    ['Basic instead of Bearer', { Authorization: 'Basic dXNlcjpwYXNz' }],
    ['Bearer without a key', { Authorization: 'Bearer ' }],
  ])('%s is 401 in the error shape', async (_what, headers) => {
    const res = await call(api, 'GET', '/apikeys', { headers: headers as Record<string, string> });
    expect(res.status).toBe(401);
    expect(errorReason(res)).toBe('UNAUTHORIZED');
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
  });

  test('a key whose user is gone is 401', async () => {
    const ghost = await createUser(api);
    await api.deps.db.users.model.deleteOne({ _id: ghost.userId });
    expect((await call(api, 'GET', '/apikeys', { key: ghost.apiKey })).status).toBe(401);
  });
});

describe('rate limiting', () => {
  test('over the plan limit is 429 with Retry-After; other keys are not affected', async () => {
    // Stay inside one fixed window (the test, a second API process included, takes seconds on a
    // loaded machine): start right after a boundary if less than 20 s of this window are left.
    const left = RATE_WINDOW_MS - (Date.now() % RATE_WINDOW_MS);
    if (left < 20_000) await new Promise((r) => setTimeout(r, left + 50));

    const limited = await createUser(api, 'tiny');
    const statuses: number[] = [];
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await call(api, 'GET', '/apikeys', { key: limited.apiKey });
      statuses.push(res.status);
      remaining.push(res.headers.get('x-ratelimit-remaining')!);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);

    const over = await call(api, 'GET', '/apikeys', { key: limited.apiKey });
    expect(over.status).toBe(429);
    expect(errorReason(over)).toBe('RATE_LIMITED');
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(over.headers.get('x-ratelimit-limit')).toBe('5');

    // The counter lives in MongoDB, so a second API process sees the same count (once this
    // process has shared its counts, which it does every 250 ms; here at once).
    await api.deps.db.rateLimits.flush();
    const second = await startTestApi({ PLANS_FILE: plansFile({ tiny: { requestsPerMinute: 5 } }) });
    try {
      expect((await call(second, 'GET', '/apikeys', { key: limited.apiKey })).status).toBe(429);
    } finally {
      await second.close();
    }
    expect((await call(api, 'GET', '/apikeys', { key: user.apiKey })).status).toBe(200);
  });
});

test('a concurrent burst never gets past the limit: 30 at once against a limit of 5', async () => {
  const left = RATE_WINDOW_MS - (Date.now() % RATE_WINDOW_MS);
  if (left < 10_000) await new Promise((r) => setTimeout(r, left + 50));
  const burst = await createUser(api, 'tiny');
  const statuses = await Promise.all(
    Array.from({ length: 30 }, () => call(api, 'GET', '/apikeys', { key: burst.apiKey }).then((r) => r.status)),
  );
  // Within a burst, a request counted early locally may see a larger shared count and be
  // refused, so a burst can admit fewer than the limit, never more.
  const ok = statuses.filter((s) => s === 200).length;
  expect(ok).toBeGreaterThanOrEqual(1);
  expect(ok).toBeLessThanOrEqual(5);
  expect(statuses.filter((s) => s === 429)).toHaveLength(30 - ok);
});

describe('error shapes', () => {
  test('unknown route is 404, with or without a key', async () => {
    for (const key of [undefined, user.apiKey]) {
      const res = await call(api, 'GET', '/no/such/route', { key });
      expect(res.status).toBe(404);
      expect(errorReason(res)).toBe('NOT_FOUND');
    }
  });

  test('a path parameter that is not percent-encoded UTF-8 names nothing: 404, never 500', async () => {
    for (const [method, path] of [
      ['GET', '/files/%ff'],
      ['GET', '/pin/%C3%28'],
      ['DELETE', '/webhooks/%ff'],
      ['GET', '/psa/pins/%E2%82'],
    ] as const) {
      const res = await call(api, method, path, { key: user.apiKey });
      expect([path, res.status, errorReason(res)]).toEqual([path, 404, 'NOT_FOUND']);
    }
    // Without a key, the key is what is wrong.
    expect((await call(api, 'GET', '/files/%ff')).status).toBe(401);
  });

  test('an unsupported method is 405 with Allow', async () => {
    const res = await call(api, 'PATCH', '/apikeys', { key: user.apiKey, body: {} });
    expect(res.status).toBe(405);
    expect(errorReason(res)).toBe('METHOD_NOT_ALLOWED');
    expect(res.headers.get('allow')).toBe('POST, GET, HEAD');
    const health = await call(api, 'DELETE', '/healthz');
    expect(health.status).toBe(405);
    expect(errorReason(health)).toBe('METHOD_NOT_ALLOWED');
  });

  test('malformed JSON is 400', async () => {
    const res = await call(api, 'POST', '/apikeys', {
      key: user.apiKey,
      body: '{"name": ',
      headers: { 'Content-Type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_JSON');
  });

  test('a gzip JSON body is read; one that is not gzip is 400, and nothing is written', async () => {
    const send = (body: Buffer) =>
      fetch(`${api.url}/apikeys`, {
        method: 'POST',
        headers: { 'X-Api-Key': user.apiKey, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
        body,
      });
    const made = await send(zlib.gzipSync(JSON.stringify({ name: 'zipped' })));
    expect([made.status, ((await made.json()) as { keyName: string }).keyName]).toEqual([201, 'zipped']);
    const before = await api.deps.db.apiKeys.model.countDocuments({ userId: user.userId });
    for (const body of [Buffer.from('{"name":"plain"}'), zlib.gzipSync('{"name":"cut"}').subarray(0, 12)]) {
      const res = await send(body);
      expect([res.status, ((await res.json()) as { error: { reason: string } }).error.reason]).toEqual([400, 'INVALID_BODY']);
    }
    expect(await api.deps.db.apiKeys.model.countDocuments({ userId: user.userId })).toBe(before);
  });

  test('a body over the limit is 413; one declared over it, at once, before it is read', async () => {
    const res = await call(api, 'POST', '/apikeys', { key: user.apiKey, body: { name: 'x'.repeat(4096) } });
    expect(res.status).toBe(413);
    expect(errorReason(res)).toBe('PAYLOAD_TOO_LARGE');
    // Declared far larger than what is sent: the answer comes without the rest (body-parser
    // answered only once the whole declared body had come, here never).
    const port = Number(new URL(api.url).port);
    for (const path of ['/apikeys', '/upload/new']) {
      const declared = await rawExchange(
        port,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${user.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 4000000000\r\n\r\n{}`,
        5_000,
      );
      expect([path, declared.status, JSON.parse(declared.body).error.reason]).toEqual([path, 413, 'PAYLOAD_TOO_LARGE']);
    }
  });

  test('a body that is not JSON is 415, and nothing is written', async () => {
    const before = await api.deps.db.apiKeys.model.countDocuments({ userId: user.userId });
    const res = await call(api, 'POST', '/apikeys', {
      key: user.apiKey,
      body: 'name=x',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(415);
    expect(errorReason(res)).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(await api.deps.db.apiKeys.model.countDocuments({ userId: user.userId })).toBe(before);
  });

  test('a JSON body that is not an object is 400', async () => {
    const res = await call(api, 'POST', '/apikeys', { key: user.apiKey, body: '[1,2]', headers: { 'Content-Type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_INPUT');
  });

  test('an operation whose body the contract requires is 400 without one; one whose body is optional takes none', async () => {
    const set = await call(api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { allowedOrigins: ['https://app.example.com'] } });
    expect(set.status).toBe(200);
    // Every field of the settings is optional, so only the missing body itself can refuse this.
    const bare = await call(api, 'PUT', '/gateway-settings', { key: user.apiKey });
    expect(bare.status).toBe(400);
    expect(errorReason(bare)).toBe('INVALID_INPUT');
    expect(bare.body.error.details).toContain('JSON body is required');
    const stored = await api.deps.db.users.model.findById(user.userId).lean();
    expect(stored?.gateway?.allowedOrigins).toEqual(['https://app.example.com']);
    // A body of the wrong type is still 415, not 400.
    const form = await call(api, 'PUT', '/gateway-settings', {
      key: user.apiKey,
      body: 'tokenRequired=true',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
    // POST /apikeys' body is optional (the name defaults): no body makes a key.
    const made = await call(api, 'POST', '/apikeys', { key: user.apiKey });
    expect([made.status, made.body.keyName]).toEqual([201, 'Default']);
    await call(api, 'DELETE', `/apikeys/${made.body.keyPrefix as string}`, { key: user.apiKey });
  });

  test("Node's own malformed-request errors are JSON too", async () => {
    const port = Number(new URL(api.url).port);
    const garbage = await rawExchange(port, 'THIS IS NOT HTTP\r\n\r\n');
    expect([garbage.status, garbage.headers['content-type']]).toEqual([400, 'application/json; charset=utf-8']);
    expect(JSON.parse(garbage.body).error.reason).toBe('MALFORMED_REQUEST');

    const huge = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(huge.status).toBe(431);
    expect(JSON.parse(huge.body).error.reason).toBe('HEADERS_TOO_LARGE');

    // HTTP/1.1 without Host: Node's own answer was a 400 with an empty chunked body.
    const hostless = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect([hostless.status, hostless.headers['content-type'], hostless.headers.connection]).toEqual([
      400,
      'application/json; charset=utf-8',
      'close',
    ]);
    expect(JSON.parse(hostless.body).error).toEqual({
      reason: 'MALFORMED_REQUEST',
      details: 'the HTTP request could not be parsed (missing required Host header)',
    });
    // HTTP/1.0 needs no Host.
    const old = await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(old.status).toBe(200);

    // CONNECT never reaches the app in Node; with no listener it closed the connection unanswered.
    const tunnel = await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect([tunnel.status, tunnel.headers['content-type']]).toEqual([405, 'application/json; charset=utf-8']);
    expect(JSON.parse(tunnel.body).error.reason).toBe('METHOD_NOT_ALLOWED');
  });

  test('MongoDB down is 503 with Retry-After, never a stack trace', async () => {
    const broken = await startTestApi();
    await broken.deps.db.connection.close();
    try {
      const res = await call(broken, 'GET', '/apikeys', { key: user.apiKey });
      expect(res.status).toBe(503);
      expect(errorReason(res)).toBe('DEPENDENCY_UNAVAILABLE');
      expect(res.headers.get('retry-after')).toBe('5');
    } finally {
      await broken.close();
    }
  });
});
