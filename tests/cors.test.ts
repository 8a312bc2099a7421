// Per-folder CORS: the REST surface against the real stack (PUT, GET, DELETE, S3's rules, other
// users' folders), and the evaluation the S3 interface and the gateway will use.
import type { ApiServer } from '../api/server.js';
import { corsResponseHeaders, matchCorsRule, requestedHeaders, type CorsConfiguration, type CorsRule } from '../core/cors.js';
import { randomBase62 } from '../infra/secrets.js';
import { call, createUser, errorReason, startTestApi, type TestUser } from './support/stack.js';

let api: ApiServer;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  api = await startTestApi();
  [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
});
afterAll(() => api.close());

/** A folder of the user's, inserted directly: the folders endpoints are not built yet. */
async function folder(user: TestUser): Promise<string> {
  const now = Date.now();
  const _id = `fld_${randomBase62(16)}`;
  await api.deps.db.folders.insert({ _id, userId: user.userId, name: `f-${_id}`, parentFolderId: null, createdAt: now, updatedAt: now });
  return _id;
}

const cors = (user: TestUser, method: string, folderId: string, body?: unknown) =>
  call(api, method, `/folders/${folderId}/cors`, { key: user.apiKey, body });

const FULL: CorsConfiguration = {
  CORSRules: [
    {
      AllowedOrigins: ['https://app.example.com', 'https://*.example.org'],
      AllowedMethods: ['GET', 'PUT', 'POST', 'DELETE', 'HEAD'],
      AllowedHeaders: ['content-type', 'x-amz-*'],
      ExposeHeaders: ['ETag', 'x-amz-request-id'],
      MaxAgeSeconds: 3000,
      ID: 'browser-uploads',
    },
    { AllowedOrigins: ['*'], AllowedMethods: ['GET'] },
  ],
};

describe('PUT, GET and DELETE /folders/:folderId/cors', () => {
  test('round trip: the stored document is what GET answers, PUT replaces it whole, DELETE removes it', async () => {
    const id = await folder(alice);
    const put = await cors(alice, 'PUT', id, FULL);
    expect(put.status).toBe(200);
    expect(put.body).toEqual(FULL);

    const stored = await api.deps.db.cors.model.findById(id).lean();
    expect(stored).toEqual({ _id: id, userId: alice.userId, CORSRules: FULL.CORSRules, updatedAt: expect.any(Number) });
    const got = await cors(alice, 'GET', id);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(FULL);
    // Behind the guard, like every authenticated answer.
    expect(got.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);

    // A second PUT replaces the whole document: no field of the first survives.
    const smaller = { CORSRules: [{ AllowedOrigins: ['http://localhost:5173'], AllowedMethods: ['GET', 'HEAD'] }] };
    expect((await cors(alice, 'PUT', id, smaller)).body).toEqual(smaller);
    expect((await cors(alice, 'GET', id)).body).toEqual(smaller);
    expect((await api.deps.db.cors.model.findById(id).lean())!.CORSRules).toEqual(smaller.CORSRules);

    const deleted = await cors(alice, 'DELETE', id);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true, folderId: id });
    expect(await api.deps.db.cors.model.findById(id).lean()).toBeNull();
    const after = await cors(alice, 'GET', id);
    expect([after.status, errorReason(after)]).toEqual([404, 'NO_CORS_CONFIGURATION']);
    // Deleting again: there is nothing to delete.
    const again = await cors(alice, 'DELETE', id);
    expect([again.status, errorReason(again)]).toEqual([404, 'NO_CORS_CONFIGURATION']);
    // The folder document itself is untouched: CORS lives in its own collection.
    expect(await api.deps.db.folders.findForUser(alice.userId, id)).toMatchObject({ _id: id, name: `f-${id}` });
  });

  test('concurrent first writes all succeed and leave one whole document', async () => {
    // Straight to the store, so the writes meet: on FerretDB two upserts of a new _id both try
    // to insert and one fails with a duplicate key (measured: 40 of 100 here), which put() retries.
    const id = await folder(alice);
    const rules = Array.from({ length: 20 }, (_, i) => [{ AllowedOrigins: [`https://app${i}.example.com`], AllowedMethods: ['GET'] }]);
    await Promise.all(rules.map((CORSRules, i) => api.deps.db.cors.put({ _id: id, userId: alice.userId, CORSRules, updatedAt: i })));
    const stored = await api.deps.db.cors.get(id);
    expect(rules).toContainEqual(stored!.CORSRules);
    expect(stored!.CORSRules).toEqual(rules[stored!.updatedAt]);
    expect((await cors(alice, 'GET', id)).body).toEqual({ CORSRules: stored!.CORSRules });
  });

  test('GET of a folder without a configuration is 404 NO_CORS_CONFIGURATION', async () => {
    const res = await cors(alice, 'GET', await folder(alice));
    expect(res.status).toBe(404);
    expect(errorReason(res)).toBe('NO_CORS_CONFIGURATION');
    expect(res.body.error.details).toBe('CORS configuration not found');
  });

  test("another user's folder answers exactly as a missing one (404 NOT_FOUND), and its configuration is untouched", async () => {
    const bobs = await folder(bob);
    expect((await cors(bob, 'PUT', bobs, FULL)).status).toBe(200);
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const body = method === 'PUT' ? { CORSRules: [{ AllowedOrigins: ['https://evil.example'], AllowedMethods: ['GET'] }] } : undefined;
      const theirs = await cors(alice, method, bobs, body);
      const missing = await cors(alice, method, 'fld_doesNotExist00', body);
      expect([method, theirs.status, errorReason(theirs)]).toEqual([method, 404, 'NOT_FOUND']);
      expect([method, theirs.body]).toEqual([method, missing.body]);
    }
    expect((await cors(bob, 'GET', bobs)).body).toEqual(FULL);
  });

  test('without a key it is 401; other methods are 405 with Allow', async () => {
    const id = await folder(alice);
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const res = await call(api, method, `/folders/${id}/cors`, { body: method === 'PUT' ? FULL : undefined });
      expect([method, res.status, errorReason(res)]).toEqual([method, 401, 'UNAUTHORIZED']);
    }
    const post = await cors(alice, 'POST', id, FULL);
    expect([post.status, errorReason(post), post.headers.get('allow')]).toEqual([405, 'METHOD_NOT_ALLOWED', 'PUT, GET, HEAD, DELETE']);
  });

  test('the limits are inclusive: 100 rules, an ID of 255 characters, MaxAgeSeconds 0, one * per origin and header', async () => {
    const id = await folder(alice);
    const rule: CorsRule = {
      AllowedOrigins: ['https://*.example.com', '*'],
      AllowedMethods: ['GET'],
      AllowedHeaders: ['*', 'x-amz-meta-*'],
      MaxAgeSeconds: 0,
      ID: 'r'.repeat(255),
    };
    const config = { CORSRules: Array.from({ length: 100 }, () => rule) };
    const res = await cors(alice, 'PUT', id, config);
    expect(res.status).toBe(200);
    expect((await cors(alice, 'GET', id)).body).toEqual(config);
  });
});

describe("S3's rules: refused with 400 INVALID_CORS naming the rule and field, and nothing written", () => {
  const ok = { AllowedOrigins: ['https://app.example.com'], AllowedMethods: ['GET'] };
  const cases: [string, unknown, string][] = [
    ['no CORSRules', {}, 'CORSRules: at least one rule is required'],
    ['no rules', { CORSRules: [] }, 'CORSRules: at least one rule is required'],
    ['101 rules', { CORSRules: Array.from({ length: 101 }, () => ok) }, 'CORSRules: at most 100 rules, got 101'],
    ['no AllowedMethods', { CORSRules: [ok, { AllowedOrigins: ['*'] }] }, 'CORSRules[1].AllowedMethods: required'],
    ['empty AllowedMethods', { CORSRules: [{ ...ok, AllowedMethods: [] }] }, 'CORSRules[0].AllowedMethods: needs at least one entry'],
    [
      'the method PATCH',
      { CORSRules: [{ ...ok, AllowedMethods: ['GET', 'PATCH'] }] },
      'CORSRules[0].AllowedMethods[1]: "PATCH" is not one of',
    ],
    ['a lower-case method', { CORSRules: [{ ...ok, AllowedMethods: ['get'] }] }, 'CORSRules[0].AllowedMethods[0]: "get"'],
    ['no AllowedOrigins', { CORSRules: [{ AllowedMethods: ['GET'] }] }, 'CORSRules[0].AllowedOrigins: required'],
    ['empty AllowedOrigins', { CORSRules: [{ ...ok, AllowedOrigins: [] }] }, 'CORSRules[0].AllowedOrigins: needs at least one entry'],
    [
      'an origin with two *',
      { CORSRules: [ok, { ...ok, AllowedOrigins: ['https://ok.example', 'https://*.*.example.com'] }] },
      'CORSRules[1].AllowedOrigins[1]: "https://*.*.example.com" has more than one * wildcard',
    ],
    [
      'an origin with a line break',
      { CORSRules: [{ ...ok, AllowedOrigins: ['https://a.example\r\nX-Evil: 1'] }] },
      'CORSRules[0].AllowedOrigins[0]',
    ],
    ['an empty origin', { CORSRules: [{ ...ok, AllowedOrigins: [''] }] }, 'CORSRules[0].AllowedOrigins[0]'],
    [
      'a header with two *',
      { CORSRules: [{ ...ok, AllowedHeaders: ['x-*-*'] }] },
      'CORSRules[0].AllowedHeaders[0]: "x-*-*" has more than one',
    ],
    [
      'a header with a space',
      { CORSRules: [{ ...ok, AllowedHeaders: ['content type'] }] },
      'CORSRules[0].AllowedHeaders[0]: "content type" is not',
    ],
    ['an exposed header with a line break', { CORSRules: [{ ...ok, ExposeHeaders: ['ETag\r\nX-Evil'] }] }, 'CORSRules[0].ExposeHeaders[0]'],
    ['a negative MaxAgeSeconds', { CORSRules: [{ ...ok, MaxAgeSeconds: -1 }] }, 'CORSRules[0].MaxAgeSeconds: a whole number of seconds'],
    ['a fractional MaxAgeSeconds', { CORSRules: [{ ...ok, MaxAgeSeconds: 1.5 }] }, 'CORSRules[0].MaxAgeSeconds'],
    ['an ID of 256 characters', { CORSRules: [{ ...ok, ID: 'x'.repeat(256) }] }, 'CORSRules[0].ID: at most 255 characters'],
  ];

  let id: string;
  beforeAll(async () => {
    id = await folder(alice);
  });

  test.each(cases)('%s', async (_name, body, details) => {
    const res = await cors(alice, 'PUT', id, body);
    expect(res.status).toBe(400);
    expect(errorReason(res)).toBe('INVALID_CORS');
    expect(res.body.error.details).toContain(details);
    expect(await api.deps.db.cors.get(id)).toBeNull();
  });

  test('every problem is named in one answer', async () => {
    const res = await cors(alice, 'PUT', id, { CORSRules: [{ AllowedOrigins: ['a*b*c'], AllowedMethods: ['TRACE'], MaxAgeSeconds: -5 }] });
    expect(errorReason(res)).toBe('INVALID_CORS');
    const details: string = res.body.error.details;
    for (const field of ['AllowedOrigins[0]', 'AllowedMethods[0]', 'MaxAgeSeconds']) expect(details).toContain(`CORSRules[0].${field}`);
  });

  test('the validation comes before the folder: a bad configuration for a missing folder is 400 too', async () => {
    const res = await cors(alice, 'PUT', 'fld_doesNotExist00', { CORSRules: [] });
    expect([res.status, errorReason(res)]).toEqual([400, 'INVALID_CORS']);
  });

  test('wrong JSON types and unknown fields are 400 INVALID_INPUT; unparsable JSON and other media types as everywhere', async () => {
    const wrong: unknown[] = [
      { CORSRules: [{ ...ok, AllowedMethods: 'GET' }] },
      { CORSRules: [{ ...ok, MaxAgeSeconds: '3000' }] },
      { CORSRules: [{ ...ok, AllowedOrigin: ['*'] }] },
      { CORSRules: [ok], Rules: [] },
      { CORSRules: ok },
      [ok],
    ];
    for (const body of wrong) {
      const res = await cors(alice, 'PUT', id, body);
      expect([body, res.status, errorReason(res)]).toEqual([body, 400, 'INVALID_INPUT']);
    }
    const json = { 'Content-Type': 'application/json' };
    const broken = await call(api, 'PUT', `/folders/${id}/cors`, { key: alice.apiKey, body: '{"CORSRules":', headers: json });
    expect([broken.status, errorReason(broken)]).toEqual([400, 'INVALID_JSON']);
    const text = await call(api, 'PUT', `/folders/${id}/cors`, { key: alice.apiKey, body: 'x', headers: { 'Content-Type': 'text/plain' } });
    expect([text.status, errorReason(text)]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    expect(await api.deps.db.cors.get(id)).toBeNull();
  });
});

describe('matchCorsRule and corsResponseHeaders (what the S3 interface and the gateway will enforce)', () => {
  const exact: CorsRule = { AllowedOrigins: ['https://app.example.com'], AllowedMethods: ['GET', 'PUT'], ID: 'exact' };
  const wildcard: CorsRule = {
    AllowedOrigins: ['https://*.example.com'],
    AllowedMethods: ['GET', 'POST'],
    AllowedHeaders: ['Content-Type', 'x-amz-*'],
    ExposeHeaders: ['ETag'],
    MaxAgeSeconds: 600,
    ID: 'wildcard',
  };
  const anyone: CorsRule = { AllowedOrigins: ['*'], AllowedMethods: ['GET', 'HEAD'], AllowedHeaders: ['*'], ID: 'anyone' };
  const config: CorsConfiguration = { CORSRules: [exact, wildcard, anyone] };
  const match = (origin: string, method: string, requestHeaders?: string[]) =>
    matchCorsRule(config, { origin, method, requestHeaders })?.ID ?? null;

  test('an exact origin matches only itself, case-sensitively', () => {
    expect(match('https://app.example.com', 'PUT')).toBe('exact');
    expect(match('https://APP.example.com', 'PUT')).toBeNull();
    expect(match('https://app.example.com:8443', 'PUT')).toBeNull();
    expect(match('http://app.example.com', 'PUT')).toBeNull();
  });

  test('one * in an origin stands for any run of characters', () => {
    expect(match('https://cdn.example.com', 'POST')).toBe('wildcard');
    expect(match('https://a.b.example.com', 'POST')).toBe('wildcard');
    expect(match('https://example.com', 'POST')).toBeNull();
    expect(match('https://cdn.example.com.evil.net', 'POST')).toBeNull();
    expect(match('http://cdn.example.com', 'POST')).toBeNull();
  });

  test('the method must be one of the rule’s; a mismatch falls through to later rules', () => {
    expect(match('https://app.example.com', 'DELETE')).toBeNull();
    expect(match('https://app.example.com', 'get')).toBeNull();
    // PUT is not allowed by the wildcard rule; GET is allowed by the first rule that matches.
    expect(match('https://cdn.example.com', 'PUT')).toBeNull();
    expect(match('https://cdn.example.com', 'HEAD')).toBe('anyone');
  });

  test('requested headers must each match an AllowedHeaders entry, case-insensitively, with * wildcards', () => {
    expect(match('https://cdn.example.com', 'POST', ['content-type', 'X-Amz-Date', 'x-amz-meta-owner'])).toBe('wildcard');
    expect(match('https://cdn.example.com', 'POST', ['authorization'])).toBeNull();
    // A rule without AllowedHeaders allows no requested header.
    expect(match('https://app.example.com', 'GET', ['x-custom'])).toBe('anyone');
    expect(match('https://app.example.com', 'PUT', ['x-custom'])).toBeNull();
    expect(match('https://anywhere.test', 'GET', ['x-anything', 'authorization'])).toBe('anyone');
  });

  test('* matches every origin; the first matching rule wins; no origin matches nothing', () => {
    expect(match('https://anywhere.test', 'GET')).toBe('anyone');
    expect(match('https://app.example.com', 'GET')).toBe('exact');
    expect(matchCorsRule({ CORSRules: [anyone, exact] }, { origin: 'https://app.example.com', method: 'GET' })?.ID).toBe('anyone');
    expect(match('', 'GET')).toBeNull();
  });

  test('requestedHeaders splits Access-Control-Request-Headers', () => {
    expect(requestedHeaders(' content-type , x-amz-date,,')).toEqual(['content-type', 'x-amz-date']);
    expect(requestedHeaders(undefined)).toEqual([]);
  });

  test('the response headers echo the origin, or * for a rule that allows any origin', () => {
    expect(corsResponseHeaders(wildcard, { origin: 'https://cdn.example.com', requestHeaders: ['content-type', 'x-amz-date'] })).toEqual({
      'Access-Control-Allow-Origin': 'https://cdn.example.com',
      'Access-Control-Allow-Methods': 'GET, POST',
      'Access-Control-Allow-Headers': 'content-type, x-amz-date',
      'Access-Control-Expose-Headers': 'ETag',
      'Access-Control-Max-Age': '600',
      Vary: 'Origin',
    });
    expect(corsResponseHeaders(exact, { origin: 'https://app.example.com' })).toEqual({
      'Access-Control-Allow-Origin': 'https://app.example.com',
      'Access-Control-Allow-Methods': 'GET, PUT',
      Vary: 'Origin',
    });
    expect(corsResponseHeaders(anyone, { origin: 'https://anywhere.test' })).toMatchObject({ 'Access-Control-Allow-Origin': '*' });
    // An origin allowed by name is echoed even when the rule also has *.
    const both: CorsRule = { AllowedOrigins: ['https://app.example.com', '*'], AllowedMethods: ['GET'] };
    expect(corsResponseHeaders(both, { origin: 'https://app.example.com' })['Access-Control-Allow-Origin']).toBe('https://app.example.com');
    expect(corsResponseHeaders(both, { origin: 'https://other.test' })['Access-Control-Allow-Origin']).toBe('*');
    expect(corsResponseHeaders({ ...exact, MaxAgeSeconds: 0 }, { origin: 'https://app.example.com' })['Access-Control-Max-Age']).toBe('0');
  });
});
