// The web console's account screens (IPNS names, gateway and tokens, S3, webhooks, usage) driven
// in headless Chromium against the real stack, as tests/console.test.ts drives the others; each
// action checked against the API, each screen with axe-core.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import type { ApiServer } from '../api/server.js';
import { WEBHOOK_EVENT_TYPES } from '../core/webhook-events.js';
import { launchBrowser } from './support/browser.js';
import { consolePages, type ConsolePages } from './support/console.js';
import { hostRequest } from './support/host-request.js';
import { call, createUser, startTestApi, testEnv, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let browser: Browser;
let user: TestUser;
let pages: ConsolePages;
const queue = testTaskQueue();

beforeAll(async () => {
  // Webhooks to a receiver on loopback (WEBHOOK_ALLOW_PRIVATE), as tests/webhooks.test.ts; one
  // environment for both processes, so that the worker unseals the secrets the API sealed.
  const env = testEnv({ TEMPORAL_TASK_QUEUE: queue, WEBHOOK_ALLOW_PRIVATE: 'true' });
  [api, worker, browser] = await Promise.all([startTestApi(env), startWorkerProcess(env), launchBrowser()]);
  user = await createUser(api, 'karma');
  pages = consolePages(browser, api.url);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), browser?.close()]);
});

test('names: created, a CID published and resolved, the DNSLink record shown; gateway settings and tokens; S3 credentials', async () => {
  const file = (await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `for a name ${Date.now()}` } })).body;
  const { page, problems } = await pages.openConsole();
  await pages.signIn(page, user.apiKey);
  await pages.screen(page, 'IPNS names');
  await page.getByLabel('Key name').fill('website');
  await page.getByRole('button', { name: 'Create name' }).click();
  const card = page.locator('li[data-name="website"]');
  await card.waitFor();
  const ipnsName = (await card.locator('code.cid').first().textContent())!;
  await card.getByLabel('CID to publish').fill(file.cid);
  await card.getByRole('button', { name: 'Publish' }).click();
  await card.getByText(file.cid).first().waitFor();
  await card.getByRole('button', { name: 'Resolve website' }).click();
  expect(await card.locator('.resolved').textContent()).toContain(`resolves to ${file.cid} (sequence 1)`);
  expect((await call(api, 'GET', `/ipns/resolve/${ipnsName}`, { key: user.apiKey })).body).toMatchObject({ cid: file.cid, sequence: 1 });
  await card.getByLabel('Domain for DNSLink').fill('example.com');
  await card.getByRole('button', { name: 'Show record' }).click();
  expect(await card.getByTestId('dnslink-value').textContent()).toBe(`dnslink=/ipns/${ipnsName}`);
  await pages.snapshotOf(page, 'names');

  await pages.screen(page, 'Gateway and tokens');
  const profile = (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body;
  await page.getByRole('link', { name: profile.gatewayUrl }).waitFor();
  await page.getByLabel('Require a gateway token').check();
  await page.getByLabel(/Allowed origins/).fill('https://app.example.com');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText('Saved.').waitFor();
  expect((await call(api, 'GET', '/user/profile', { key: user.apiKey })).body).toMatchObject({
    gatewayTokenRequired: true,
    gatewayAllowedOrigins: ['https://app.example.com'],
  });
  await page.getByLabel('Token name').first().fill('site');
  await page.getByRole('button', { name: 'Create gateway token' }).click();
  const token = (await page.getByTestId('new-secret').textContent())!;
  const listed = (await call(api, 'GET', '/gateway-tokens', { key: user.apiKey })).body;
  expect(listed.map((t: any) => t.tokenPrefix)).toEqual([token.slice(0, 12)]);
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByRole('region', { name: 'Signed upload tokens' }).getByLabel('Token name').fill('uploader');
  await page.getByRole('button', { name: 'Create upload token' }).click();
  expect(await page.getByTestId('new-secret').textContent()).toMatch(/^sup_/);
  await page.getByRole('cell', { name: 'uploader', exact: true }).waitFor();
  await pages.snapshotOf(page, 'gateway');

  await pages.screen(page, 'S3');
  expect(await page.getByTestId('s3-access-key-id').textContent()).toBe(user.keyPrefix);
  await page.getByTestId('s3-endpoint').getByText('http').waitFor();
  expect(await page.getByTestId('s3-endpoint').textContent()).toBe(api.deps.config.s3.publicUrl);
  await pages.snapshotOf(page, 's3');
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('webhooks: added with the service’s event types, the secret shown once, a signed test event delivered and logged, paused', async () => {
  const received: { headers: Record<string, string>; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => (received.push({ headers: req.headers as Record<string, string>, body }), res.end('ok')));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    const { page, problems } = await pages.openConsole();
    await pages.signIn(page, user.apiKey);
    await pages.screen(page, 'Webhooks');
    const events = page.getByRole('group', { name: 'Events' });
    await events.getByRole('checkbox').first().waitFor();
    expect(await events.getByRole('checkbox').count()).toBe(WEBHOOK_EVENT_TYPES.length);
    await page.getByLabel(/Endpoint URL/).fill(`http://127.0.0.1:${port}/hook`);
    await events.getByLabel('upload.created', { exact: true }).check();
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = (await page.getByTestId('new-secret').textContent())!;
    expect(secret).toMatch(/^whsec_/);
    const [made] = (await call(api, 'GET', '/webhooks', { key: user.apiKey })).body.items;
    expect(made).toMatchObject({ url: `http://127.0.0.1:${port}/hook`, events: ['upload.created'], enabled: true });

    const card = page.locator(`li[data-webhook="${made.id}"]`);
    await card.getByRole('button', { name: /^Send a test event/ }).click();
    await eventually(
      async () => received.length,
      (n) => n > 0,
      30_000,
      'the test event received',
    );
    // Signed with the secret the page showed once.
    const payload = new Webhook(secret).verify(received[0]!.body, received[0]!.headers) as { type: string };
    expect(payload.type).toBe('webhook.test');
    await eventually(
      async () => {
        await card.getByRole('button', { name: /^Refresh/ }).click();
        return card
          .locator('tr[data-event="webhook.test"]')
          .getAttribute('data-state', { timeout: 2000 })
          .catch(() => null);
      },
      (state) => state === 'delivered',
      30_000,
      'delivered in the log',
    );
    await pages.snapshotOf(page, 'webhooks');
    await card.getByRole('button', { name: 'Pause' }).click();
    await card.getByRole('button', { name: 'Resume' }).waitFor();
    expect((await call(api, 'GET', `/webhooks/${made.id}`, { key: user.apiKey })).body.enabled).toBe(false);
    expect(problems).toEqual([]);
    await page.close();
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}, 90_000);

test('usage: the plan limits as bars and the charts after some traffic, their numbers those of the API', async () => {
  // Uploads of two types besides the names test's text file.
  for (const content of [{ kind: 'json' }, 'more text'])
    expect((await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content } })).status).toBe(201);
  // Gateway traffic: one file read twice through the account's gateway (open again).
  expect((await call(api, 'PUT', '/gateway-settings', { key: user.apiKey, body: { tokenRequired: false } })).status).toBe(200);
  const profile0 = (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body;
  const file = (await call(api, 'GET', '/upload/list?limit=1', { key: user.apiKey })).body.items[0];
  for (let i = 0; i < 2; i++) {
    const read = await hostRequest(new URL(api.gatewayUrl).port, `${profile0.gatewaySlug}.localhost`, `/ipfs/${file.cid}`);
    expect(read.body.length).toBe(file.size);
  }
  const analytics = await eventually(
    async () => (await call(api, 'GET', '/analytics', { key: user.apiKey })).body,
    (a) => a.daily.at(-1).gatewayMB > 0,
    10_000,
    'gateway bytes counted',
  );
  expect(analytics.daily.at(-1).gatewayMB).toBeCloseTo((2 * file.size) / 2 ** 20, 6);

  const { page, problems } = await pages.openConsole();
  await pages.signIn(page, user.apiKey);
  await pages.screen(page, 'Usage');
  const profile = (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body;
  expect(analytics.totals.uploads).toBe(3); // the names test's one, and the two above
  expect(Object.keys(analytics.totals.fileTypes).sort()).toEqual(['application/json', 'text/plain']);
  await page
    .getByRole('img', { name: /Uploads by type/ })
    .locator('canvas')
    .first()
    .waitFor();
  expect(await page.locator('figure.chart canvas').count()).toBeGreaterThanOrEqual(4);
  const storage = page.getByRole('meter', { name: 'Storage' });
  expect(Number(await storage.getAttribute('value'))).toBeCloseTo(profile.storageUsedMB, 6);
  expect(Number(await storage.getAttribute('max'))).toBe(profile.limits.storageMB);
  // Each chart's numbers, as its table gives them to a screen reader.
  const numbers = async (title: string) => {
    const figure = page.locator('figure.chart', { hasText: title });
    return figure
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((r) => [r.children[0]!.textContent, Number(r.children[1]!.textContent)]));
  };
  const today = analytics.daily.at(-1);
  expect((await numbers('Uploads per day')).at(-1)).toEqual([today.date, today.uploads]);
  expect(Object.fromEntries(await numbers('Uploads by type'))).toEqual(analytics.totals.fileTypes);
  expect((await numbers('Gateway bandwidth per day')).at(-1)).toEqual([today.date, today.gatewayMB]);
  expect((await numbers('Storage over time')).at(-1)).toEqual([today.date, analytics.storageGrowth.at(-1).cumulativeMB]);
  await pages.snapshotOf(page, 'usage');
  expect(problems).toEqual([]);
  await page.close();
}, 60_000);
