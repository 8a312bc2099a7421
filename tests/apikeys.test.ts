import type { ApiServer } from '../api/server.js';
import { AUTH_MEMORY_MS } from '../infra/constants.js';
import { digest, unseal } from '../infra/secrets.js';
import { call, createUser, errorReason, plansFile, startTestApi, type TestUser } from './support/stack.js';

let api: ApiServer;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  api = await startTestApi({ PLANS_FILE: plansFile({ dharma: { apiKeys: 4 } }) });
  alice = await createUser(api);
  bob = await createUser(api);
});
afterAll(() => api.close());

describe('API key lifecycle', () => {
  test('create returns the full key once, stores only its digest and a sealed copy', async () => {
    const before = Date.now();
    const res = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: 'ci' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      apiKey: expect.stringMatching(/^stp_[0-9A-Za-z]{32}$/),
      keyPrefix: res.body.apiKey.slice(0, 12),
      keyName: 'ci',
      createdAt: expect.any(Number),
    });
    expect(res.body.createdAt).toBeGreaterThanOrEqual(before);

    const stored = await api.deps.db.apiKeys.model.findById(res.body.keyPrefix).lean();
    expect(stored).toMatchObject({ userId: alice.userId, digest: digest(res.body.apiKey), keyName: 'ci' });
    expect(JSON.stringify(stored)).not.toContain(res.body.apiKey);
    expect(unseal(api.deps.config.masterKey, stored!.sealedSecret)).toBe(res.body.apiKey);

    // The new key works, and the list never shows a full key.
    const list = await call(api, 'GET', '/apikeys', { key: res.body.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.map((k: { keyPrefix: string }) => k.keyPrefix)).toEqual([alice.keyPrefix, res.body.keyPrefix]);
    expect(list.text).not.toContain(res.body.apiKey);
    expect(list.text).not.toContain(alice.apiKey);
    await call(api, 'DELETE', `/apikeys/${res.body.keyPrefix}`, { key: alice.apiKey });
  });

  test('name defaults to "Default"; no body and an empty JSON body both work', async () => {
    const a = await call(api, 'POST', '/apikeys', { key: alice.apiKey });
    const b = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: {} });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect([a.body.keyName, b.body.keyName]).toEqual(['Default', 'Default']);
    expect(a.body.expiresAt).toBeUndefined();
    for (const k of [a, b]) expect((await call(api, 'DELETE', `/apikeys/${k.body.keyPrefix}`, { key: alice.apiKey })).status).toBe(200);
  });

  test('list shows lastUsedAt once a key is used, and it reaches MongoDB', async () => {
    const created = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: 'used' } });
    const listed = await call(api, 'GET', '/apikeys', { key: alice.apiKey });
    expect(listed.body.find((k: { keyPrefix: string }) => k.keyPrefix === created.body.keyPrefix).lastUsedAt).toBeNull();

    const usedAt = Date.now();
    await call(api, 'GET', '/apikeys', { key: created.body.apiKey });
    const after = await call(api, 'GET', '/apikeys', { key: alice.apiKey });
    const entry = after.body.find((k: { keyPrefix: string }) => k.keyPrefix === created.body.keyPrefix);
    expect(entry).toEqual({
      keyPrefix: created.body.keyPrefix,
      keyName: 'used',
      createdAt: created.body.createdAt,
      lastUsedAt: expect.any(Number),
    });
    expect(entry.lastUsedAt).toBeGreaterThanOrEqual(usedAt);

    await api.deps.db.apiKeys.flush();
    const stored = await api.deps.db.apiKeys.model.findById(created.body.keyPrefix).lean();
    expect(stored!.lastUsedAt).toBe(entry.lastUsedAt);
    await call(api, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: alice.apiKey });
  });

  test('delete by full key and by prefix is effective at once', async () => {
    for (const by of ['key', 'prefix'] as const) {
      const created = await call(api, 'POST', '/apikeys', { key: alice.apiKey });
      expect((await call(api, 'GET', '/apikeys', { key: created.body.apiKey })).status).toBe(200);
      const target = by === 'key' ? created.body.apiKey : created.body.keyPrefix;
      const del = await call(api, 'DELETE', `/apikeys/${target}`, { key: alice.apiKey });
      expect(del.status).toBe(200);
      expect(del.body).toEqual({ success: true, keyPrefix: created.body.keyPrefix });
      const reuse = await call(api, 'GET', '/apikeys', { key: created.body.apiKey });
      expect(reuse.status).toBe(401);
      expect(await api.deps.db.apiKeys.model.findById(created.body.keyPrefix).lean()).toBeNull();
      // Deleting twice is 404.
      expect((await call(api, 'DELETE', `/apikeys/${target}`, { key: alice.apiKey })).status).toBe(404);
    }
  });

  test("another user's key is 404 and survives", async () => {
    for (const target of [bob.keyPrefix, bob.apiKey]) {
      const res = await call(api, 'DELETE', `/apikeys/${target}`, { key: alice.apiKey });
      expect(res.status).toBe(404);
      expect(errorReason(res)).toBe('NOT_FOUND');
    }
    expect((await call(api, 'GET', '/apikeys', { key: bob.apiKey })).status).toBe(200);
  });

  test('a made-up key with a real prefix does not delete it', async () => {
    const fake = alice.keyPrefix + 'x'.repeat(24);
    expect((await call(api, 'DELETE', `/apikeys/${fake}`, { key: alice.apiKey })).status).toBe(404);
    expect((await call(api, 'DELETE', '/apikeys/nonsense', { key: alice.apiKey })).status).toBe(404);
    expect(await api.deps.db.apiKeys.model.findById(alice.keyPrefix).lean()).not.toBeNull();
  });

  test('deleting the last usable key is refused with 409', async () => {
    const carol = await createUser(api);
    const res = await call(api, 'DELETE', `/apikeys/${carol.keyPrefix}`, { key: carol.apiKey });
    expect(res.status).toBe(409);
    expect(errorReason(res)).toBe('LAST_API_KEY');
    expect((await call(api, 'GET', '/apikeys', { key: carol.apiKey })).status).toBe(200);

    // With a second key, the first can go; then the second is the last.
    const second = await call(api, 'POST', '/apikeys', { key: carol.apiKey });
    expect((await call(api, 'DELETE', `/apikeys/${carol.keyPrefix}`, { key: second.body.apiKey })).status).toBe(200);
    expect((await call(api, 'DELETE', `/apikeys/${second.body.keyPrefix}`, { key: second.body.apiKey })).status).toBe(409);
  });

  test('an expired key does not count as a remaining key', async () => {
    const dave = await createUser(api);
    const short = await call(api, 'POST', '/apikeys', { key: dave.apiKey, body: { expiresIn: 60 } });
    await api.deps.db.apiKeys.model.updateOne({ _id: short.body.keyPrefix }, { $set: { expiresAt: Date.now() - 1 } });
    const res = await call(api, 'DELETE', `/apikeys/${dave.keyPrefix}`, { key: dave.apiKey });
    expect(res.status).toBe(409);
    // The expired one itself can be deleted.
    expect((await call(api, 'DELETE', `/apikeys/${short.body.keyPrefix}`, { key: dave.apiKey })).status).toBe(200);
  });

  test('two concurrent deletes of the last two keys leave one key', async () => {
    const erin = await createUser(api);
    const second = await call(api, 'POST', '/apikeys', { key: erin.apiKey });
    const results = await Promise.all([
      call(api, 'DELETE', `/apikeys/${erin.keyPrefix}`, { key: second.body.apiKey }),
      call(api, 'DELETE', `/apikeys/${second.body.keyPrefix}`, { key: erin.apiKey }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(await api.deps.db.apiKeys.model.countDocuments({ userId: erin.userId })).toBe(1);
  });

  test('the plan limits the number of keys (402 naming the limit)', async () => {
    const frank = await createUser(api);
    const made = [];
    for (let i = 1; i < 4; i++) made.push(await call(api, 'POST', '/apikeys', { key: frank.apiKey }));
    expect(made.map((r) => r.status)).toEqual([201, 201, 201]);
    const over = await call(api, 'POST', '/apikeys', { key: frank.apiKey });
    expect(over.status).toBe(402);
    expect(errorReason(over)).toBe('API_KEY_LIMIT');
    expect(await api.deps.db.apiKeys.model.countDocuments({ userId: frank.userId })).toBe(4);
  });
});

test('a key is remembered between requests; its deletion answers once no process remembers it, and another process refuses it next', async () => {
  const other = await startTestApi({ LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent' });
  try {
    const created = await call(api, 'POST', '/apikeys', { key: alice.apiKey });
    const keyReads = () => other.deps.db.operations().get('find apikeys') ?? 0;
    expect((await call(other, 'GET', '/user/profile', { key: created.body.apiKey })).status).toBe(200);
    const before = keyReads();
    expect((await call(other, 'GET', '/user/profile', { key: created.body.apiKey })).status).toBe(200);
    expect(keyReads()).toBe(before); // the second request of the key read no key

    const started = performance.now();
    expect((await call(api, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: alice.apiKey })).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(AUTH_MEMORY_MS);
    const next = await call(other, 'GET', '/user/profile', { key: created.body.apiKey });
    expect(next.status).toBe(401);
    expect(next.body.error.details).toMatch(/unknown or was deleted/);
    // A retry of the deletion (its first answer lost) is 404 after the same wait.
    const retried = performance.now();
    expect((await call(api, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: alice.apiKey })).status).toBe(404);
    expect(performance.now() - retried).toBeGreaterThanOrEqual(AUTH_MEMORY_MS);
  } finally {
    await other.close();
  }
});

describe('API key expiry', () => {
  test('expiresIn gives expiresAt, listed too; an expired key is 401', async () => {
    const created = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: 'temp', expiresIn: 60 } });
    expect(created.status).toBe(201);
    expect(created.body.expiresAt).toBe(created.body.createdAt + 60_000);
    const listed = await call(api, 'GET', '/apikeys', { key: created.body.apiKey });
    expect(listed.body.find((k: { keyPrefix: string }) => k.keyPrefix === created.body.keyPrefix).expiresAt).toBe(created.body.expiresAt);

    // Expiry is a comparison with the stored time: move it into the past in the database, as an
    // operator would; the processes that remember the key read it again within AUTH_MEMORY_MS.
    await api.deps.db.apiKeys.model.updateOne({ _id: created.body.keyPrefix }, { $set: { expiresAt: Date.now() - 1 } });
    await new Promise((r) => setTimeout(r, AUTH_MEMORY_MS));
    const res = await call(api, 'GET', '/apikeys', { key: created.body.apiKey });
    expect(res.status).toBe(401);
    expect(res.body.error.details).toMatch(/expired/);
    await call(api, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: alice.apiKey });
  });

  test.each([
    [{ expiresIn: 59 }, 'expiresIn'],
    [{ expiresIn: 1.5 }, 'expiresIn'],
    [{ expiresIn: '3600' }, 'expiresIn'],
    [{ name: '' }, 'name'],
    [{ name: 'x'.repeat(65) }, 'name'],
    [{ name: 7 }, 'name'],
    [{ nmae: 'typo' }, 'nmae'],
  ])('bad input %j is 400 naming %s, and nothing is written', async (body, field) => {
    const before = await api.deps.db.apiKeys.model.countDocuments({ userId: alice.userId });
    const res = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body });
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_INPUT');
    expect(res.body.error.details).toContain(field);
    expect(await api.deps.db.apiKeys.model.countDocuments({ userId: alice.userId })).toBe(before);
  });
});
