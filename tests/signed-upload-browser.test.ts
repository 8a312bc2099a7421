// A web page on another origin uploads with a signed token's uploadUrl in a real browser
// (headless Chromium): the preflight for `Authorization` passes, the answer is readable, and
// so is a refusal. The browser enforces CORS; nothing here can pretend it did.
import type { Browser } from 'playwright-core';
import type { ApiServer } from '../api/server.js';
import { collect, kubo } from './support/content.js';
import { launchBrowser, serveOrigin } from './support/browser.js';
import { call, createUser, startTestApi, type TestUser } from './support/stack.js';
import { startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let user: TestUser;
let browser: Browser;
const queue = testTaskQueue();

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue };
  [api, worker, browser] = await Promise.all([startTestApi(env), startWorkerProcess(env), launchBrowser()]);
  user = await createUser(api);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), browser?.close()]);
});

test('a page on another origin uploads a file with the token and reads the answer', async () => {
  const made = await call(api, 'POST', '/upload/signed-url', { key: user.apiKey, body: { maxUses: 1, allowedMimeTypes: ['text/*'] } });
  const { token, uploadUrl } = made.body as { token: string; uploadUrl: string };
  const origin = await serveOrigin('<!doctype html><title>uploader</title>');
  try {
    const page = await browser.newPage();
    await page.goto(origin.url);
    const upload = (text: string) =>
      page.evaluate(
        async ({ url, token, text }) => {
          const form = new FormData();
          form.append('file', new Blob([text], { type: 'text/plain' }), 'from-browser.txt');
          try {
            const res = await fetch(url, { method: 'POST', headers: { Authorization: `Signed ${token}` }, body: form });
            return { status: res.status, body: (await res.json()) as any, rateLimit: res.headers.get('X-RateLimit-Limit') };
          } catch (err) {
            return { status: 0, body: String(err) as any, rateLimit: null };
          }
        },
        { url: uploadUrl, token, text },
      );
    const first = await upload('uploaded by a browser');
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ name: 'from-browser.txt', mimeType: 'text/plain', size: 21 });
    // Exposed headers are readable by the page.
    expect(first.rateLimit).toMatch(/^\d+$/);
    expect((await collect(kubo().cat(first.body.cid))).toString()).toBe('uploaded by a browser');
    // The token's one use is spent: the refusal is readable too (CORS headers on errors).
    const second = await upload('once more');
    expect(second.status).toBe(403);
    expect(second.body.error.reason).toBe('TOKEN_USED_UP');
  } finally {
    await origin.close();
  }
});
