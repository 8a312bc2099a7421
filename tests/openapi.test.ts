// api/rest/openapi.json is a contract that tools test against, so it is tested itself: valid
// OpenAPI 3.1 with valid JSON Schemas and resolvable references, the same operations as the
// Express app registers, every status an operation answers documented (no `default`), and
// real answers of the running API valid against the schemas documented for their status.
import { Validator } from '@seriousme/openapi-schema-validator';
import { createApp } from '../api/rest/app.js';
import type { ApiServer } from '../api/server.js';
import { call, createUser, plansFile, startTestApi, type Reply, type TestUser } from './support/stack.js';
import { testTaskQueue } from './support/worker.js';
import { ajv, compile, deref, doc, pointerGet, walk } from './support/openapi.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const HELLO = 'bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e';

/** Every documented operation as `METHOD /path/{param}`, with its object. */
const operations: [string, string, any][] = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
  Object.keys(item)
    .filter((m) => METHODS.includes(m))
    .map((m): [string, string, any] => [m.toUpperCase(), path, item[m]]),
);
const isAuthenticated = (op: any) => !(Array.isArray(op.security) && op.security.length === 0);

/** `/file/:cid` → `/file/{cid}` */
const openApiPathOf = (expressPath: string) => expressPath.replace(/:(\w+)/g, '{$1}');

interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
  rawPath?: unknown;
}

/** Every method and path the app's routers register, found by walking Express's router stack. */
function appRoutes(stack: Layer[], prefix = ''): string[] {
  const found: string[] = [];
  for (const layer of stack) {
    if (layer.route) {
      for (const path of [layer.route.path].flat()) {
        for (const method of Object.keys(layer.route.methods).filter((m) => m !== '_all')) {
          found.push(`${method.toUpperCase()} ${openApiPathOf(prefix + path)}`);
        }
      }
    } else if (Array.isArray(layer.handle.stack)) {
      // A mounted router: this app mounts them all at the root.
      if (typeof layer.rawPath !== 'string') throw new Error(`a router mounted at ${String(layer.rawPath)}: teach this test its path`);
      found.push(...appRoutes(layer.handle.stack, prefix + (layer.rawPath === '/' ? '' : layer.rawPath)));
    }
  }
  return found;
}

/** Reason codes a response's description names, e.g. `INVALID_CID`. */
const reasonsNamed = (description: string) => [...description.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]);

/**
 * Checks an answer against the document: its status is documented for the operation, its
 * body is valid against the schema for that status and media type, the headers the response
 * declares are sent, and an error's reason is one that the response's description names.
 */
function conforms(method: string, path: string, reply: Reply, expected?: number): void {
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${path} is not documented`);
  if (expected !== undefined) expect({ status: reply.status, body: reply.body }).toMatchObject({ status: expected });
  const response = deref(op.responses[String(reply.status)]);
  if (!response) throw new Error(`${method} ${path} answered ${reply.status}, which is not documented: ${reply.text.slice(0, 300)}`);
  const mediaType = (reply.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const media = response.content?.[mediaType];
  if (!media) throw new Error(`${method} ${path} ${reply.status} answered ${mediaType}, not one of ${Object.keys(response.content ?? {})}`);
  const reason: unknown = reply.body?.error?.reason;
  const validate = compile(media.schema);
  if (!validate(reply.body)) {
    throw new Error(`${method} ${path} ${reply.status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(reply.body, null, 2)}`);
  }
  for (const name of Object.keys(response.headers ?? {})) {
    if (reply.headers.get(name) === null) throw new Error(`${method} ${path} ${reply.status} has no ${name} header`);
  }
  if (reply.status >= 400) expect(reasonsNamed(response.description)).toContain(reason);
}

describe('the document', () => {
  test('is valid OpenAPI 3.1 and every $ref resolves', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(() => validator.resolveRefs()).not.toThrow();
    const refs = [...walk(doc)].filter(([, n]) => typeof n.$ref === 'string').map(([, n]) => n.$ref as string);
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of refs) expect(() => pointerGet(ref)).not.toThrow();
  });

  test('every schema in it is valid JSON Schema 2020-12, strictly', () => {
    const schemas = [...walk(doc)].filter(
      ([path]) => path.at(-1) === 'schema' || path.at(-1) === 'contentSchema' || (path.length === 3 && path[1] === 'schemas'),
    );
    expect(schemas.length).toBeGreaterThan(40);
    for (const [path, schema] of schemas) {
      try {
        compile(schema);
      } catch (err) {
        throw new Error(`${path.join('/')}: ${(err as Error).message}`);
      }
    }
  });

  test('operations are well-formed: unique IDs, declared path parameters, known tags, no `default` answer', () => {
    const ids = operations.map(([, , op]) => op.operationId);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const tags = new Set(doc.tags.map((t: { name: string }) => t.name));
    for (const [method, path, op] of operations) {
      const where = `${method} ${path}`;
      expect([where, op.tags.filter((t: string) => !tags.has(t))]).toEqual([where, []]);
      expect([where, Object.keys(op.responses).filter((s) => !/^[1-5]\d\d$/.test(s))]).toEqual([where, []]);
      const params = [...(doc.paths[path].parameters ?? []), ...(op.parameters ?? [])].map(deref);
      const inPath = params.filter((p) => p.in === 'path').map((p) => p.name);
      const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect([where, inPath.sort()]).toEqual([where, templated.sort()]);
      for (const status of Object.keys(op.responses)) {
        const response = deref(op.responses[status]);
        expect([where, status, typeof response.description]).toEqual([where, status, 'string']);
        if (Number(status) >= 400) {
          expect([where, status, response.content?.['application/json']?.schema]).toEqual([
            where,
            status,
            status === '503' && path === '/readyz' ? expect.anything() : { $ref: '#/components/schemas/Error' },
          ]);
        }
      }
    }
  });

  test('every authenticated operation documents 401, 429, 500 and 503', () => {
    const authenticated = operations.filter(([, , op]) => isAuthenticated(op));
    expect(authenticated.length).toBeGreaterThan(10);
    for (const [method, path, op] of authenticated) {
      expect([method, path, ['401', '429', '500', '503'].filter((s) => !(s in op.responses))]).toEqual([method, path, []]);
    }
  });
});

describe('the document and the running API', () => {
  let api: ApiServer;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    api = await startTestApi({
      TEMPORAL_TASK_QUEUE: testTaskQueue(),
      UPLOAD_JSON_LIMIT: '64kb',
      PLANS_FILE: plansFile({ full: { storageMB: 0, apiKeys: 1 }, slow: { requestsPerMinute: 1 } }),
    });
    [alice, bob] = await Promise.all([createUser(api), createUser(api)]);
  });
  afterAll(() => api?.close());

  test('the app registers exactly the documented operations', () => {
    const routes = appRoutes((createApp(api.deps) as unknown as { router: { stack: Layer[] } }).router.stack);
    // The web console's files (api/rest/console.ts) are a page and what it loads, not API operations.
    const registered = routes.filter((r) => !r.startsWith('GET /console'));
    expect(routes.length - registered.length).toBe(2);
    expect(registered).toContain('GET /healthz');
    const documented = operations.map(([method, path]) => `${method} ${path}`);
    expect([...new Set(registered)].sort()).toEqual([...documented].sort());
  });

  /** A request each route answers itself without changing anything: placeholders that match nothing, bodies that are refused. */
  const probe = (method: string, path: string) => ({
    path: path.replace('{cid}', HELLO).replace('{key}', 'stp_00000000').replace('{folderId}', 'fld_none'),
    body: ['POST', 'PUT'].includes(method) ? { unknownField: 1 } : undefined,
  });

  test('every documented operation is answered by its route, with a documented status and body', async () => {
    for (const [method, path] of operations) {
      const { path: url, body } = probe(method, path);
      const reply = await call(api, method, url, { key: alice.apiKey, body });
      expect([method, path, reply.status]).not.toEqual([method, path, 405]);
      if (reply.status === 404) expect(reply.body.error.details).not.toMatch(/^route /);
      conforms(method, path, reply);
    }
  });

  test('without a key, every authenticated operation is 401 as documented', async () => {
    for (const [method, path, op] of operations.filter(([, , o]) => isAuthenticated(o))) {
      const { path: url, body } = probe(method, path);
      const reply = await call(api, method, url, { body });
      conforms(method, path, reply, 401);
      expect(op.responses['401']).toEqual({ $ref: '#/components/responses/Unauthorized' });
    }
    conforms('GET', '/upload/list', await call(api, 'GET', '/upload/list', { key: 'stp_notAKeyAtAll00000000000000000000' }), 401);
  });

  test('operations endpoints', async () => {
    conforms('GET', '/healthz', await call(api, 'GET', '/healthz'), 200);
    conforms('GET', '/readyz', await call(api, 'GET', '/readyz'), 200);
    const served = await call(api, 'GET', '/openapi.json');
    conforms('GET', '/openapi.json', served, 200);
    expect(served.body).toEqual(doc);
  });

  test('API keys', async () => {
    const created = await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: 'second', expiresIn: 3600 } });
    conforms('POST', '/apikeys', created, 201);
    expect(created.body.expiresAt).toBeGreaterThan(created.body.createdAt);
    conforms('GET', '/apikeys', await call(api, 'GET', '/apikeys', { key: alice.apiKey }), 200);
    conforms('POST', '/apikeys', await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: '' } }), 400);
    conforms(
      'POST',
      '/apikeys',
      await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: '{"name":', headers: { 'Content-Type': 'application/json' } }),
      400,
    );
    conforms(
      'POST',
      '/apikeys',
      await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: 'name', headers: { 'Content-Type': 'text/plain' } }),
      415,
    );
    conforms(
      'POST',
      '/apikeys',
      await call(api, 'POST', '/apikeys', { key: alice.apiKey, body: { name: 'x'.repeat(2 * 1024 * 1024) } }),
      413,
    );
    conforms('DELETE', '/apikeys/{key}', await call(api, 'DELETE', `/apikeys/${created.body.keyPrefix}`, { key: alice.apiKey }), 200);

    const limited = await createUser(api, 'full');
    conforms('POST', '/apikeys', await call(api, 'POST', '/apikeys', { key: limited.apiKey }), 402);
    conforms('DELETE', '/apikeys/{key}', await call(api, 'DELETE', `/apikeys/${limited.keyPrefix}`, { key: limited.apiKey }), 409);
    conforms('DELETE', '/apikeys/{key}', await call(api, 'DELETE', `/apikeys/${alice.keyPrefix}`, { key: bob.apiKey }), 404);
  });

  test('uploads and files', async () => {
    const text = await call(api, 'POST', '/upload/new', { key: alice.apiKey, body: { content: 'hello world', description: 'greeting' } });
    conforms('POST', '/upload/new', text, 201);
    expect(text.body.cid).toBe(HELLO);
    const json = await call(api, 'POST', '/upload/new', {
      key: alice.apiKey,
      body: { content: { openapi: [1, 2] }, name: 'data.json', folderId: null, metadata: { project: 'contract' } },
    });
    conforms('POST', '/upload/new', json, 201);
    expect(json.body).toMatchObject({ mimeType: 'application/json', name: 'data.json', metadata: { project: 'contract' } });

    const boundary = 'openapi-test-boundary';
    const form = (parts: string[]) => ({
      body: parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('') + `--${boundary}--\r\n`,
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    });
    const multipart = await call(api, 'POST', '/upload/new', {
      key: alice.apiKey,
      ...form([
        'Content-Disposition: form-data; name="metadata"\r\n\r\n{"kind":"note"}',
        'Content-Disposition: form-data; name="file"; filename="note.txt"\r\n\r\nmultipart contract test',
      ]),
    });
    conforms('POST', '/upload/new', multipart, 201);
    expect(multipart.body).toMatchObject({ name: 'note.txt', mimeType: 'text/plain', metadata: { kind: 'note' } });

    const refused: [Parameters<typeof call>[3], number, string][] = [
      [{ body: { description: 'no content' } }, 400, 'INVALID_INPUT'],
      [{ body: { content: '!!', encoding: 'base64' } }, 400, 'INVALID_CONTENT'],
      [{ body: { content: 'x', folderId: 'fld_none' } }, 400, 'FOLDER_NOT_FOUND'],
      [{ body: '{"content":', headers: { 'Content-Type': 'application/json' } }, 400, 'INVALID_JSON'],
      [form(['Content-Disposition: form-data; name="name"\r\n\r\nno file']), 400, 'MISSING_FILE'],
      [{ body: 'x', headers: { 'Content-Type': 'multipart/form-data' } }, 400, 'INVALID_MULTIPART'],
      [{ body: { content: 'x'.repeat(100_000) } }, 413, 'PAYLOAD_TOO_LARGE'],
      [{ body: 'hello', headers: { 'Content-Type': 'text/plain' } }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ];
    for (const [options, status, reason] of refused) {
      const reply = await call(api, 'POST', '/upload/new', { key: alice.apiKey, ...options });
      conforms('POST', '/upload/new', reply, status);
      expect(reply.body.error.reason).toBe(reason);
    }
    const full = await createUser(api, 'full');
    conforms('POST', '/upload/new', await call(api, 'POST', '/upload/new', { key: full.apiKey, body: { content: 'x' } }), 402);

    const list = await call(api, 'GET', '/upload/list?limit=1&folderId=root&mimeType=text/*', { key: alice.apiKey });
    conforms('GET', '/upload/list', list, 200);
    expect(list.body.items).toHaveLength(1);
    const next = await call(api, 'GET', `/upload/list?limit=1&folderId=root&mimeType=text/*&cursor=${list.body.nextCursor}`, {
      key: alice.apiKey,
    });
    conforms('GET', '/upload/list', next, 200);
    expect(next.body.items).toHaveLength(1);
    expect(next.body.nextCursor).toBeNull();
    conforms('GET', '/upload/list', await call(api, 'GET', '/upload/list?cursor=nonsense', { key: alice.apiKey }), 400);
    conforms('GET', '/upload/list', await call(api, 'GET', '/upload/list?sort=name', { key: alice.apiKey }), 400);
    conforms('GET', '/upload/list', await call(api, 'GET', '/upload/list?limit=1001', { key: alice.apiKey }), 400);

    conforms('GET', '/file/{cid}', await call(api, 'GET', `/file/${HELLO}`, { key: alice.apiKey }), 200);
    conforms('GET', '/file/{cid}', await call(api, 'GET', `/file/${HELLO}`, { key: bob.apiKey }), 404);
    conforms('GET', '/file/{cid}', await call(api, 'GET', '/file/not-a-cid', { key: alice.apiKey }), 400);
    const renamed = await call(api, 'PUT', `/files/${HELLO}/name`, { key: alice.apiKey, body: { name: '  hello.txt ' } });
    conforms('PUT', '/files/{ref}/name', renamed, 200);
    expect(renamed.body.name).toBe('hello.txt');
    conforms('PUT', '/files/{ref}/name', await call(api, 'PUT', `/files/${HELLO}/name`, { key: alice.apiKey, body: { name: ' ' } }), 400);
    conforms('PUT', '/files/{ref}/name', await call(api, 'PUT', `/files/${HELLO}/name`, { key: bob.apiKey, body: { name: 'mine' } }), 404);
    conforms(
      'PUT',
      '/files/{ref}/name',
      await call(api, 'PUT', `/files/${HELLO}/name`, { key: alice.apiKey, body: 'x', headers: { 'Content-Type': 'text/plain' } }),
      415,
    );
    conforms(
      'PUT',
      '/files/{ref}/move',
      await call(api, 'PUT', `/files/${HELLO}/move`, { key: alice.apiKey, body: { folderId: null } }),
      200,
    );
    conforms(
      'PUT',
      '/files/{ref}/move',
      await call(api, 'PUT', `/files/${HELLO}/move`, { key: alice.apiKey, body: { folderId: 'fld_none' } }),
      404,
    );
    conforms(
      'PUT',
      '/files/{ref}/move',
      await call(api, 'PUT', '/files/Qmnotacid/move', { key: alice.apiKey, body: { folderId: null } }),
      400,
    );

    // One file by its id or its CID; a second file of the CID makes the CID ambiguous (409).
    const { id } = (await call(api, 'GET', `/file/${HELLO}`, { key: alice.apiKey })).body;
    conforms('GET', '/files/{ref}', await call(api, 'GET', `/files/${id}`, { key: alice.apiKey }), 200);
    conforms('GET', '/files/{ref}', await call(api, 'GET', `/files/${HELLO}`, { key: alice.apiKey }), 200);
    conforms('GET', '/files/{ref}', await call(api, 'GET', `/files/${id}`, { key: bob.apiKey }), 404);
    conforms('GET', '/files/{ref}', await call(api, 'GET', '/files/fil_x', { key: alice.apiKey }), 400);
    const copy = await call(api, 'POST', '/upload/new', { key: alice.apiKey, body: { content: 'hello world', name: 'copy.txt' } });
    conforms('POST', '/upload/new', copy, 201);
    conforms('GET', '/file/{cid}', await call(api, 'GET', `/file/${HELLO}`, { key: alice.apiKey }), 200);
    conforms('GET', '/upload/list', await call(api, 'GET', `/upload/list?cid=${HELLO}`, { key: alice.apiKey }), 200);
    conforms('GET', '/upload/list', await call(api, 'GET', '/upload/list?cid=nope', { key: alice.apiKey }), 400);
    conforms('GET', '/files/{ref}', await call(api, 'GET', `/files/${HELLO}`, { key: alice.apiKey }), 409);
    conforms('PUT', '/files/{ref}/name', await call(api, 'PUT', `/files/${HELLO}/name`, { key: alice.apiKey, body: { name: 'n' } }), 409);
    const twin = await call(api, 'PUT', `/files/${copy.body.id}/name`, { key: alice.apiKey, body: { name: 'hello.txt' } });
    conforms('PUT', '/files/{ref}/name', twin, 409);
    conforms(
      'PUT',
      '/files/{ref}/move',
      await call(api, 'PUT', `/files/${HELLO}/move`, { key: alice.apiKey, body: { folderId: null } }),
      409,
    );
    conforms('DELETE', '/pin/{cid}', await call(api, 'DELETE', `/pin/${HELLO}`, { key: alice.apiKey }), 409);
    conforms('DELETE', '/pins/{cid}', await call(api, 'DELETE', `/pins/${HELLO}`, { key: alice.apiKey }), 409);
    conforms('DELETE', '/files/{ref}', await call(api, 'DELETE', `/files/${HELLO}`, { key: alice.apiKey }), 409);
    conforms('DELETE', '/files/{ref}', await call(api, 'DELETE', `/files/${copy.body.id}`, { key: alice.apiKey }), 200);
    conforms('DELETE', '/files/{ref}', await call(api, 'DELETE', `/files/${copy.body.id}`, { key: alice.apiKey }), 404);
    conforms('DELETE', '/files/{ref}', await call(api, 'DELETE', '/files/not-a-ref', { key: alice.apiKey }), 400);
  });

  test('pins (of content the stack has, so the request pins it itself)', async () => {
    const content = await call(api, 'POST', '/upload/new', { key: bob.apiKey, body: { content: 'pinned by the contract test' } });
    const { cid } = content.body;
    for (const base of ['/pin', '/pins']) {
      const pinned = await call(api, 'POST', base, { key: bob.apiKey, body: { cid, name: 'contract', origins: [], metadata: { a: 'b' } } });
      conforms('POST', base, pinned, 202);
      expect(pinned.body).toMatchObject({ cid, status: 'pinned', error: null, pinnedAt: expect.any(Number) });
      conforms('GET', `${base}/{cid}`, await call(api, 'GET', `${base}/${cid}`, { key: bob.apiKey }), 200);
      conforms('GET', `${base}/{cid}`, await call(api, 'GET', `${base}/${cid}`, { key: alice.apiKey }), 404);
      conforms('GET', `${base}/{cid}`, await call(api, 'GET', `${base}/not-a-cid`, { key: bob.apiKey }), 400);
      conforms('POST', base, await call(api, 'POST', base, { key: bob.apiKey, body: { cid: 'not-a-cid' } }), 400);
      conforms('POST', base, await call(api, 'POST', base, { key: bob.apiKey, body: { cid, origins: ['/ip4/127.0.0.1/tcp/4001'] } }), 400);
      conforms('POST', base, await call(api, 'POST', base, { key: bob.apiKey }), 400);
      conforms('POST', base, await call(api, 'POST', base, { key: bob.apiKey, body: cid, headers: { 'Content-Type': 'text/plain' } }), 415);
      conforms('POST', base, await call(api, 'POST', base, { key: bob.apiKey, body: { cid, name: 'x'.repeat(2 * 1024 * 1024) } }), 413);
      const deleted = await call(api, 'DELETE', `${base}/${cid}`, { key: bob.apiKey });
      conforms('DELETE', `${base}/{cid}`, deleted, 200);
      expect(deleted.body).toEqual({ success: true, cid });
      conforms('DELETE', `${base}/{cid}`, await call(api, 'DELETE', `${base}/${cid}`, { key: bob.apiKey }), 404);
      conforms('DELETE', `${base}/{cid}`, await call(api, 'DELETE', `${base}/bogus`, { key: bob.apiKey }), 400);
    }
    const full = await createUser(api, 'full');
    conforms('POST', '/pin', await call(api, 'POST', '/pin', { key: full.apiKey, body: { cid: HELLO } }), 402);
  });

  test('folder CORS', async () => {
    const now = Date.now();
    const folderId = `fld_openapi${now}`;
    await api.deps.db.folders.insert({
      _id: folderId,
      userId: alice.userId,
      name: 'site',
      parentFolderId: null,
      createdAt: now,
      updatedAt: now,
    });
    const path = '/folders/{folderId}/cors';
    const url = `/folders/${folderId}/cors`;
    const example = doc.paths[path].put.requestBody.content['application/json'].examples.browserUploads.value;
    conforms('GET', path, await call(api, 'GET', url, { key: alice.apiKey }), 404);
    conforms('DELETE', path, await call(api, 'DELETE', url, { key: alice.apiKey }), 404);
    const put = await call(api, 'PUT', url, { key: alice.apiKey, body: example });
    conforms('PUT', path, put, 200);
    expect(put.body).toEqual(example);
    conforms('GET', path, await call(api, 'GET', url, { key: alice.apiKey }), 200);
    const refused: [Parameters<typeof call>[3], number][] = [
      [{ body: { CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['PATCH'] }] } }, 400],
      [{ body: { CORSRules: [{ AllowedOrigins: '*', AllowedMethods: ['GET'] }] } }, 400],
      [{ body: '{"CORSRules":', headers: { 'Content-Type': 'application/json' } }, 400],
      [{ body: 'x', headers: { 'Content-Type': 'text/plain' } }, 415],
      [{ body: { CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['GET'], ID: 'x'.repeat(2 * 1024 * 1024) }] } }, 413],
    ];
    for (const [options, status] of refused) conforms('PUT', path, await call(api, 'PUT', url, { key: alice.apiKey, ...options }), status);
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const body = method === 'PUT' ? example : undefined;
      conforms(method, path, await call(api, method, url, { key: bob.apiKey, body }), 404);
    }
    const deleted = await call(api, 'DELETE', url, { key: alice.apiKey });
    conforms('DELETE', path, deleted, 200);
    expect(deleted.body).toEqual({ success: true, folderId });
  });

  test('429 carries Retry-After and the rate limit headers', async () => {
    const slow = await createUser(api, 'slow');
    let reply: Reply | undefined;
    // Two requests over a limit of one a minute, unless a new minute begins between them.
    for (let i = 0; i < 5 && reply?.status !== 429; i++) reply = await call(api, 'GET', '/upload/list', { key: slow.apiKey });
    conforms('GET', '/upload/list', reply!, 429);
  });

  test('503 when MongoDB is down', async () => {
    const broken = await startTestApi();
    await broken.deps.db.connection.close();
    try {
      conforms('GET', '/upload/list', await call(broken, 'GET', '/upload/list', { key: alice.apiKey }), 503);
      conforms('GET', '/pin/{cid}', await call(broken, 'GET', `/pin/${HELLO}`, { key: alice.apiKey }), 503);
    } finally {
      await broken.close();
    }
  });
});
