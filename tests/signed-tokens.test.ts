// Signed upload tokens against the real stack: every rule of a token (size cut off while the
// bytes stream, types by declaration and by content, uses counted atomically, expiry,
// revocation, folder), what the owner sees, and the plan's limit.
import { Readable } from 'node:stream';
import sharp from 'sharp';
import type { ApiServer } from '../api/server.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { bytes, kubo, kuboCid, MiB, multipart } from './support/content.js';
import { call, createUser, errorReason, newestFile, plansFile, startTestApi, type Reply, type TestUser } from './support/stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;
let other: TestUser;
const queue = testTaskQueue();

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue, PLANS_FILE: plansFile({ fewtokens: { signedTokens: 2 } }) };
  [api, worker] = await Promise.all([startTestApi(env), startWorkerProcess(env)]);
  [user, other] = await Promise.all([createUser(api), createUser(api)]);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill()]);
});

async function makeToken(body: Record<string, unknown> = {}, owner = user) {
  const res = await call(api, 'POST', '/upload/signed-url', { key: owner.apiKey, body });
  expect(res.status).toBe(201);
  return res.body as { token: string; tokenId: string; tokenPrefix: string; tokenName: string; expiresAt: number; uploadUrl: string };
}

/** A multipart upload with the token, its body streamed (no Content-Length) unless `length`. */
async function signedUpload(
  token: string,
  file: { name: string; type?: string; source: AsyncIterable<Uint8Array> },
  fields: Record<string, string> = {},
): Promise<Reply> {
  const form = multipart(fields, file);
  const res = await fetch(`${api.url}/upload/new`, {
    method: 'POST',
    headers: { Authorization: `Signed ${token}`, 'Content-Type': form.contentType },
    body: Readable.toWeb(Readable.from(form.body)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text), text };
}

async function* once(data: Uint8Array): AsyncGenerator<Uint8Array> {
  yield data;
}

const tokenRecord = async (tokenId: string) => (await api.deps.db.signedTokens.model.findById(tokenId).lean().exec())!;
const png = (seed: number) =>
  sharp({ create: { width: 8, height: 8, channels: 3, background: { r: seed, g: 10, b: 20 } } })
    .png()
    .toBuffer();

describe('making and listing tokens', () => {
  test('POST /upload/signed-url answers the token once, with its ID, prefix, expiry and upload URL', async () => {
    const before = Date.now();
    const t = await makeToken({ name: 'avatars', expiresIn: 600 });
    expect(t.token).toMatch(/^sup_[0-9A-Za-z]{32}$/);
    expect(t.tokenPrefix).toBe(t.token.slice(0, 12));
    expect(t.tokenName).toBe('avatars');
    expect(t.expiresAt).toBeGreaterThanOrEqual(before + 600_000);
    expect(t.expiresAt).toBeLessThanOrEqual(Date.now() + 600_000);
    expect(t.uploadUrl).toBe(`${api.url}/upload/new`);
    // Stored as a digest only.
    expect(JSON.stringify(await tokenRecord(t.tokenId))).not.toContain(t.token);

    const list = await call(api, 'GET', '/signed-tokens', { key: user.apiKey });
    expect(list.status).toBe(200);
    const listed = list.body.items.find((i: { tokenId: string }) => i.tokenId === t.tokenId);
    expect(listed).toEqual(
      expect.objectContaining({
        tokenPrefix: t.tokenPrefix,
        tokenName: 'avatars',
        expiresAt: t.expiresAt,
        useCount: 0,
        lastUsedAt: null,
        revoked: false,
      }),
    );
    expect(JSON.stringify(list.body)).not.toContain(t.token);
    // Another user sees none of them and cannot revoke them.
    expect((await call(api, 'GET', '/signed-tokens', { key: other.apiKey })).body.items).toEqual([]);
    expect((await call(api, 'DELETE', `/signed-tokens/${t.tokenId}`, { key: other.apiKey })).status).toBe(404);
  });

  test('bad input is 400; expiresIn is at most 7 days; an unknown folder is refused', async () => {
    for (const body of [{ expiresIn: 7 * 24 * 3600 + 1 }, { expiresIn: 0 }, { maxUses: 0 }, { allowedMimeTypes: ['png'] }, { nope: 1 }]) {
      const res = await call(api, 'POST', '/upload/signed-url', { key: user.apiKey, body });
      expect(res.status).toBe(400);
    }
    const res = await call(api, 'POST', '/upload/signed-url', { key: user.apiKey, body: { folderId: 'fld_missing' } });
    expect([res.status, errorReason(res)]).toEqual([400, 'FOLDER_NOT_FOUND']);
  });

  test('the plan limits tokens in use; a revoked or expired one frees its place', async () => {
    const owner = await createUser(api, 'fewtokens');
    const a = await makeToken({ expiresIn: 1 }, owner);
    const b = await makeToken({}, owner);
    const third = await call(api, 'POST', '/upload/signed-url', { key: owner.apiKey, body: {} });
    expect([third.status, errorReason(third)]).toEqual([402, 'SIGNED_TOKEN_LIMIT']);
    await call(api, 'DELETE', `/signed-tokens/${b.tokenId}`, { key: owner.apiKey });
    await makeToken({}, owner);
    await new Promise((r) => setTimeout(r, Math.max(0, a.expiresAt - Date.now() + 50)));
    await makeToken({}, owner); // `a` expired: its place is taken again
    expect((await call(api, 'POST', '/upload/signed-url', { key: owner.apiKey, body: {} })).status).toBe(402);
  });

  test('lists page with limit and cursor, newest first', async () => {
    const owner = await createUser(api);
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await makeToken({ name: `t${i}` }, owner)).tokenId);
    const first = await call(api, 'GET', '/signed-tokens?limit=2', { key: owner.apiKey });
    const second = await call(api, 'GET', `/signed-tokens?limit=2&cursor=${first.body.nextCursor}`, { key: owner.apiKey });
    expect([...first.body.items, ...second.body.items].map((i: { tokenId: string }) => i.tokenId)).toEqual(made.reverse());
    expect(second.body.nextCursor).toBeNull();
  });
});

describe('uploading with a token', () => {
  test("the file is the owner's, counts against the owner's storage, and the use is counted", async () => {
    const t = await makeToken({ maxUses: 5 });
    const usedBefore = await api.deps.db.usage.used(user.userId);
    const content = Buffer.from('a file sent by a browser');
    const res = await signedUpload(t.token, { name: 'note.txt', type: 'text/plain', source: once(content) });
    expect(res.status).toBe(201);
    expect(res.body.cid).toBe(await kuboCid(() => once(content)));
    const owned = await call(api, 'GET', `/file/${res.body.cid}`, { key: user.apiKey });
    expect(owned.status).toBe(200);
    expect(owned.body.name).toBe('note.txt');
    expect((await call(api, 'GET', `/file/${res.body.cid}`, { key: other.apiKey })).status).toBe(404);
    expect(await api.deps.db.usage.used(user.userId)).toBe(usedBefore + content.length);
    const record = await tokenRecord(t.tokenId);
    expect(record).toMatchObject({ useCount: 1, lastUsedAt: expect.any(Number) });
  });

  test('a token can only upload: any other endpoint is 401', async () => {
    const t = await makeToken();
    for (const [method, path] of [
      ['GET', '/upload/list'],
      ['GET', '/signed-tokens'],
      ['POST', '/upload/signed-url'],
    ]) {
      const res = await call(api, method!, path!, {
        headers: { Authorization: `Signed ${t.token}` },
        body: method === 'POST' ? {} : undefined,
      });
      expect([res.status, errorReason(res)]).toEqual([401, 'UNAUTHORIZED']);
    }
  });

  test('unknown and malformed tokens are 401; a revoked one is 401 at once', async () => {
    const fake = `sup_${'A'.repeat(32)}`;
    for (const token of [fake, 'sup_short', 'garbage']) {
      const res = await signedUpload(token, { name: 'x.txt', source: once(Buffer.from('x')) });
      expect([res.status, errorReason(res)]).toEqual([401, 'UNAUTHORIZED']);
    }
    const t = await makeToken();
    expect((await signedUpload(t.token, { name: 'a.txt', source: once(Buffer.from('before revoke')) })).status).toBe(201);
    const revoked = await call(api, 'DELETE', `/signed-tokens/${t.tokenId}`, { key: user.apiKey });
    expect(revoked.body).toEqual({ success: true, tokenId: t.tokenId });
    const res = await signedUpload(t.token, { name: 'b.txt', source: once(Buffer.from('after revoke')) });
    expect([res.status, errorReason(res)]).toEqual([401, 'UNAUTHORIZED']);
    const list = await call(api, 'GET', '/signed-tokens?limit=1000', { key: user.apiKey });
    expect(list.body.items.find((i: { tokenId: string }) => i.tokenId === t.tokenId)).toMatchObject({ revoked: true, useCount: 1 });
  });

  test('an expired token is 403', async () => {
    const t = await makeToken({ expiresIn: 1 });
    await new Promise((r) => setTimeout(r, Math.max(0, t.expiresAt - Date.now() + 50)));
    const res = await signedUpload(t.token, { name: 'late.txt', source: once(Buffer.from('too late')) });
    expect([res.status, errorReason(res)]).toEqual([403, 'TOKEN_EXPIRED']);
  });

  test('maxUses holds under concurrency: of 8 simultaneous uploads with 3 uses left, exactly 3 pass', async () => {
    const t = await makeToken({ maxUses: 3 });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => signedUpload(t.token, { name: `${i}.txt`, source: once(Buffer.from(`concurrent ${i}`)) })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 403, 403, 403, 403, 403]);
    for (const r of results.filter((x) => x.status === 403)) expect(errorReason(r)).toBe('TOKEN_USED_UP');
    expect(await tokenRecord(t.tokenId)).toMatchObject({ useCount: 3, usesLeft: 0 });
  });

  test('past maxFileSize the stream is cut with 413 and nothing is kept; the use goes back', async () => {
    const t = await makeToken({ maxFileSize: MiB, maxUses: 1 });
    const usedBefore = await api.deps.db.usage.used(user.userId);
    const size = 3 * MiB;
    const res = await signedUpload(t.token, { name: 'big.bin', source: bytes(size, 'too-big') });
    expect([res.status, errorReason(res)]).toEqual([413, 'FILE_TOO_LARGE']);
    // No record, no storage counted, and the whole file never reached Kubo.
    const whole = await kuboCid(() => bytes(size, 'too-big'));
    expect(await newestFile(api, user.userId, parseCid(whole).multihash)).toBeNull();
    expect(await api.deps.db.usage.used(user.userId)).toBe(usedBefore);
    await expect(kubo().block.stat(parseCid(whole).cid, { signal: AbortSignal.timeout(1500) })).rejects.toThrow();
    expect(await tokenRecord(t.tokenId)).toMatchObject({ useCount: 0, usesLeft: 1 });
    // The one use is still there for a file that fits.
    expect((await signedUpload(t.token, { name: 'ok.bin', source: bytes(MiB, 'fits') })).status).toBe(201);
  });

  test('a declared length far past maxFileSize is refused before the body is read', async () => {
    const t = await makeToken({ maxFileSize: 1000 });
    const body = Buffer.alloc(4 * MiB, 7);
    const form = `--b\r\nContent-Disposition: form-data; name="file"; filename="x.bin"\r\n\r\n`;
    const res = await call(api, 'POST', '/upload/new', {
      headers: { Authorization: `Signed ${t.token}`, 'Content-Type': 'multipart/form-data; boundary=b' },
      body: Buffer.concat([Buffer.from(form), body, Buffer.from('\r\n--b--\r\n')]),
    });
    expect([res.status, errorReason(res)]).toEqual([413, 'FILE_TOO_LARGE']);
  });

  test('allowedMimeTypes is checked against the declared type and against the bytes', async () => {
    const t = await makeToken({ allowedMimeTypes: ['image/*'] });
    const real = await png(1);
    const ok = await signedUpload(t.token, { name: 'a.png', type: 'image/png', source: once(real) });
    expect([ok.status, ok.body.mimeType]).toEqual([201, 'image/png']);
    // A real PNG declared as text; text declared as a PNG; a ZIP declared as a PNG.
    const zip = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(100, 1)]);
    const cases: [string, string, Buffer, string][] = [
      ['a.txt', 'text/plain', real, 'MIME_TYPE_NOT_ALLOWED'],
      ['b.png', 'image/png', Buffer.from('<html><script>alert(1)</script></html>'), 'MIME_TYPE_MISMATCH'],
      ['c.png', 'image/png', zip, 'MIME_TYPE_NOT_ALLOWED'],
    ];
    for (const [name, type, content, reason] of cases) {
      const res = await signedUpload(t.token, { name, type, source: once(content) });
      expect([name, res.status, errorReason(res)]).toEqual([name, 415, reason]);
      const kept = await newestFile(api, user.userId, parseCid(await kuboCid(() => once(content))).multihash);
      // The real PNG was uploaded once, as a.png; the refused uploads left no record.
      expect(kept === null ? null : kept.name).toBe(content === real ? 'a.png' : null);
    }
    // JSON uploads follow the same rule.
    const json = await call(api, 'POST', '/upload/new', {
      headers: { Authorization: `Signed ${t.token}` },
      body: { content: 'plain text' },
    });
    expect([json.status, errorReason(json)]).toEqual([415, 'MIME_TYPE_NOT_ALLOWED']);
    expect((await tokenRecord(t.tokenId)).useCount).toBe(1);
  });

  test("the file goes into the token's folder; asking for another is 403", async () => {
    const folder = await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: `uploads-${Date.now()}` } });
    expect(folder.status).toBe(201);
    const folderId = folder.body.folderId ?? folder.body.id;
    const t = await makeToken({ folderId });
    const res = await signedUpload(t.token, { name: 'in-folder.txt', source: once(Buffer.from('into the folder')) });
    expect([res.status, res.body.folderId]).toEqual([201, folderId]);
    const elsewhere = await signedUpload(t.token, { name: 'x.txt', source: once(Buffer.from('elsewhere')) }, { folderId: 'fld_other' });
    expect([elsewhere.status, errorReason(elsewhere)]).toEqual([403, 'FOLDER_NOT_ALLOWED']);
    expect((await tokenRecord(t.tokenId)).useCount).toBe(1);
  });
});
