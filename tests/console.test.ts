// The web console (/console/) driven in headless Chromium as a user drives it, against the real
// stack: every screen's actions, checked against what the API, Kubo and Cluster then hold.
// Accessibility is checked with axe-core on every screen, and the main actions from the keyboard.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import type { ApiServer } from '../api/server.js';
import { launchBrowser } from './support/browser.js';
import { bytes, collect, kubo, kuboCid } from './support/content.js';
import { hostRequest } from './support/host-request.js';
import { startSecondNode } from './support/second-node.js';
import { call, createUser, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let browser: Browser;
let second: Awaited<ReturnType<typeof startSecondNode>>;
let user: TestUser;
const queue = testTaskQueue();
const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const shots = process.env.CONSOLE_SCREENSHOTS;

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue };
  [api, worker, browser, second] = await Promise.all([startTestApi(env), startWorkerProcess(env), launchBrowser(), startSecondNode()]);
  user = await createUser(api, 'karma');
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), browser?.close(), second?.node.stop()]);
});

/** A page with the console open, failing the test on any script error or CSP violation. */
async function openConsole(): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    // A refused request logs itself; what matters is scripts and the policy.
    if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) problems.push(msg.text());
  });
  await page.goto(`${api.url}/console`);
  return { page, problems };
}

async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
}

async function screen(page: Page, name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
}

/** axe-core's serious and critical findings on the page as it is (none expected). */
async function accessibilityProblems(page: Page): Promise<string[]> {
  // Evaluated by the browser's debugging protocol, which the page's CSP does not govern.
  await page.evaluate(axeSource);
  const results = await page.evaluate(() => (globalThis as any).axe.run((globalThis as any).document, { resultTypes: ['violations'] }));
  return (results.violations as any[])
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
}

async function snapshotOf(page: Page, name: string): Promise<void> {
  expect(await accessibilityProblems(page)).toEqual([]);
  if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

test('the console is served under a strict policy, and a wrong key gets a readable refusal', async () => {
  const index = await fetch(`${api.url}/console/`);
  expect(index.status).toBe(200);
  const csp = index.headers.get('content-security-policy')!;
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("style-src 'self'");
  expect(csp).not.toContain('unsafe');
  const html = await index.text();
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/); // no inline script
  expect(html).not.toMatch(/\sstyle=/);
  for (const missing of ['/console/nope.js', '/console/constructor', '/console/%2e%2e%2fpackage.json'])
    expect((await call(api, 'GET', missing)).body.error.reason).toBe('NOT_FOUND');
  expect((await call(api, 'POST', '/console/')).status).toBe(405);

  const { page, problems } = await openConsole();
  expect(new URL(page.url()).pathname).toBe('/console/');
  await page.getByLabel('API key').fill('stp_notakeyatallnotakeyatallnotakey');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  expect(await page.getByRole('alert').textContent()).toMatch(/\(UNAUTHORIZED\)$/);
  await snapshotOf(page, 'sign-in');
  // The key is kept in the tab's sessionStorage only, never in a cookie.
  await signIn(page, user.apiKey);
  expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('stupa.apiKey'))).toBe(user.apiKey);
  expect(await page.context().cookies()).toEqual([]);
  expect(problems).toEqual([]);
  await page.close();
});

test('files: a folder, three dropped files and a picked nested directory, with Kubo-identical CIDs, then a snapshot', async () => {
  const { page, problems } = await openConsole();
  await signIn(page, user.apiKey);
  await page.getByLabel('New folder').fill('site');
  await page.getByRole('button', { name: 'Create folder' }).click();
  await page.getByRole('link', { name: 'site' }).click();
  await page.getByRole('navigation', { name: 'Folder path' }).getByRole('link', { name: 'site' }).waitFor();
  const folderId = new URL(page.url().replace('#/', '')).searchParams.get('folder')!;
  expect(folderId).toMatch(/^fld_/);

  // Three files dropped on the drop zone, as a drag from the desktop delivers them.
  const texts = ['alpha '.repeat(100), 'beta '.repeat(2000), `gamma ${Date.now()}`];
  await page.getByTestId('dropzone').evaluate((zone, texts) => {
    const g = globalThis as any;
    const data = new g.DataTransfer();
    texts.forEach((t, i) => data.items.add(new File([t], `dropped-${i}.txt`, { type: 'text/plain' })));
    zone.dispatchEvent(new g.DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
  }, texts);
  // A nested directory picked with the folder picker: www/index.html and www/css/site.css.
  const dir = path.join(tempDir(), 'www');
  fs.mkdirSync(path.join(dir, 'css'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'index.html'), '<h1>hello</h1>');
  fs.writeFileSync(path.join(dir, 'css', 'site.css'), 'h1 { color: red }');
  await page.getByLabel('Choose a folder').setInputFiles(dir);

  const rows = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem');
  await eventually(
    () => rows.evaluateAll((items) => items.map((li) => li.getAttribute('data-state'))),
    (states) => states.length === 5 && states.every((s) => s === 'done'),
    30_000,
    'five uploads done',
  );
  const shown = await rows.evaluateAll((items) =>
    items.map((li) => [
      li.querySelector('.name')!.textContent,
      li.querySelector('.percent')!.textContent,
      li.querySelector('.cid')!.textContent,
    ]),
  );
  const expected = new Map<string, string>();
  for (const [i, t] of texts.entries()) expected.set(`dropped-${i}.txt`, t);
  expected.set('www/index.html', '<h1>hello</h1>');
  expected.set('www/css/site.css', 'h1 { color: red }');
  expect(shown.map(([name]) => name).sort()).toEqual([...expected.keys()].sort());
  for (const [name, percent, cid] of shown) {
    expect(percent).toBe('100 %');
    const content = expected.get(name!)!;
    expect(cid).toBe(
      await kuboCid(async function* () {
        yield Buffer.from(content);
      }),
    );
    expect((await collect(kubo().cat(cid!))).toString()).toBe(content);
  }
  // The directory became folders: www under site, css under www, each with its file.
  const www = (await call(api, 'GET', `/folders?parentFolderId=${folderId}`, { key: user.apiKey })).body.items;
  expect(www.map((f: any) => [f.name, f.fileCount])).toEqual([['www', 1]]);
  const css = (await call(api, 'GET', `/folders?parentFolderId=${www[0].folderId}`, { key: user.apiKey })).body.items;
  expect(css.map((f: any) => [f.name, f.fileCount])).toEqual([['css', 1]]);
  const inSite = (await call(api, 'GET', `/upload/list?folderId=${folderId}`, { key: user.apiKey })).body.items;
  expect(inSite.map((f: any) => f.name).sort()).toEqual(['dropped-0.txt', 'dropped-1.txt', 'dropped-2.txt']);

  // The file list shows them; rename one, and delete another (asked twice).
  const table = page.getByRole('region', { name: 'Files' });
  await table.getByRole('cell', { name: 'dropped-2.txt', exact: true }).waitFor();
  await table.getByRole('button', { name: 'Rename or move dropped-0.txt' }).click();
  await table.getByRole('textbox', { name: 'Name', exact: true }).fill('renamed.txt');
  await table.getByRole('button', { name: 'Save' }).click();
  await table.getByRole('cell', { name: 'renamed.txt', exact: true }).waitFor();
  await table.getByRole('button', { name: 'Delete file dropped-1.txt' }).click();
  await table.getByRole('button', { name: 'Confirm deleting file dropped-1.txt' }).click();
  await eventually(
    async () =>
      (await call(api, 'GET', `/upload/list?folderId=${folderId}`, { key: user.apiKey })).body.items.map((f: any) => f.name).sort(),
    (names) => names.join() === 'dropped-2.txt,renamed.txt',
    10_000,
    'renamed and deleted',
  );
  await table.getByRole('cell', { name: 'dropped-1.txt', exact: true }).waitFor({ state: 'detached' });

  // A snapshot of the folder: its progress, then its CID, the API's and pinned in Kubo.
  await page.getByRole('button', { name: 'Take a snapshot' }).click();
  await page.getByText('Snapshot complete').waitFor({ timeout: 60_000 });
  const job = (await call(api, 'GET', `/folders/${folderId}/snapshot`, { key: user.apiKey })).body;
  expect(job.status).toBe('complete');
  await page.getByRole('region', { name: 'Snapshots' }).locator(`tr[data-cid="${job.snapshot.cid}"]`).waitFor();
  const pinned = [];
  for await (const p of kubo().pin.ls({ paths: [job.snapshot.cid] })) pinned.push(p.cid.toString());
  expect(pinned).toEqual([job.snapshot.cid]);
  await snapshotOf(page, 'files');
  expect(problems).toEqual([]);
  await page.close();
}, 180_000);

test('pins: a CID only a second node has, pinned with that node as origin, followed live to pinned; a bad CID is explained', async () => {
  const content = `only on the second node ${Date.now()}`;
  const added = await second.client.add(Buffer.from(content), { cidVersion: 1, rawLeaves: true });
  const cid = added.cid.toString();
  const { page, problems } = await openConsole();
  await signIn(page, user.apiKey);
  await screen(page, 'Pins');
  await page.getByRole('textbox', { name: 'CID', exact: true }).fill('not-a-cid');
  await page.getByRole('button', { name: 'Pin', exact: true }).click();
  expect(await page.getByRole('alert').textContent()).toMatch(/\(INVALID_CID\)|\(INVALID_INPUT\)/);

  await page.getByRole('textbox', { name: 'CID', exact: true }).fill(cid);
  await page.getByLabel('Name (optional)').fill('from the console');
  await page.getByLabel(/Origins/).fill(second.node.swarmAddress);
  await page.getByRole('button', { name: 'Pin', exact: true }).click();
  const row = page.locator(`tr[data-cid="${cid}"]`);
  await row.waitFor();
  // The row follows the request until Cluster reports it pinned.
  await page.locator(`tr[data-cid="${cid}"][data-status="pinned"]`).waitFor({ timeout: 60_000 });
  expect((await call(api, 'GET', `/pins/${cid}`, { key: user.apiKey })).body).toMatchObject({ status: 'pinned', name: 'from the console' });
  expect((await collect(kubo().cat(cid))).toString()).toBe(content);
  await snapshotOf(page, 'pins');

  await row.getByRole('button', { name: `Delete pin ${cid}` }).click();
  await row.getByRole('button', { name: `Confirm deleting pin ${cid}` }).click();
  await row.waitFor({ state: 'detached' });
  expect((await call(api, 'GET', `/pins/${cid}`, { key: user.apiKey })).status).toBe(404);
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('keys from the keyboard alone: created and shown once, then deleted; a revoked key sends the page back to the prompt', async () => {
  const { page, problems } = await openConsole();
  // Sign in without the mouse: the key field has the focus first, Enter submits.
  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => (globalThis as any).document.activeElement.id)).toBe('api-key');
  await page.keyboard.type(user.apiKey);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
  // To the Keys screen by tabbing through the navigation.
  const focusOn = async (name: string) => {
    for (let i = 0; i < 60; i++) {
      await page.keyboard.press('Tab');
      const label = await page.evaluate(() => {
        const el = (globalThis as any).document.activeElement;
        return el.getAttribute('aria-label') ?? el.textContent?.trim() ?? '';
      });
      if (label === name) return;
    }
    throw new Error(`no focusable ${name}`);
  };
  await focusOn('API keys');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  await focusOn(''); // the Name field (an input has no text)
  expect(await page.evaluate(() => (globalThis as any).document.activeElement.tagName)).toBe('INPUT');
  await page.keyboard.type('from the console');
  await page.keyboard.press('Enter');
  const secret = (await page.getByTestId('new-secret').textContent())!;
  expect(secret).toMatch(/^stp_[0-9A-Za-z]{32}$/);
  expect((await call(api, 'GET', '/user/profile', { key: secret })).status).toBe(200);
  await snapshotOf(page, 'keys');
  // Shown once: after Done it is nowhere on the page, and the list has only its prefix.
  await focusOn('Done');
  await page.keyboard.press('Enter');
  expect(await page.content()).not.toContain(secret);
  const row = page.locator(`tr[data-prefix="${secret.slice(0, 12)}"]`);
  await row.waitFor();
  await focusOn('Delete key from the console');
  await page.keyboard.press('Enter');
  await page.keyboard.press('Tab'); // the confirmation follows the button it replaced
  await focusOn('Confirm deleting key from the console');
  await page.keyboard.press('Enter');
  await row.waitFor({ state: 'detached' });
  expect((await call(api, 'GET', '/user/profile', { key: secret })).status).toBe(401);

  // The key this page uses is revoked elsewhere: its next call sends the user to the prompt.
  const spare = (await call(api, 'POST', '/apikeys', { key: user.apiKey, body: { name: 'spare' } })).body.apiKey;
  const revoked = (await call(api, 'POST', '/apikeys', { key: user.apiKey, body: { name: 'to revoke' } })).body.apiKey;
  await page.evaluate((k) => (globalThis as any).sessionStorage.setItem('stupa.apiKey', k), revoked);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  expect((await call(api, 'DELETE', `/apikeys/${revoked.slice(0, 12)}`, { key: spare })).status).toBe(200);
  await screen(page, 'Files').catch(() => undefined);
  await page.getByLabel('API key').waitFor();
  expect(await page.getByRole('alert').textContent()).toContain('no longer accepts this key');
  expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('stupa.apiKey'))).toBeNull();
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('names: created, a CID published and resolved, the DNSLink record shown; gateway settings and tokens; S3 credentials', async () => {
  const file = (await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `for a name ${Date.now()}` } })).body;
  const { page, problems } = await openConsole();
  await signIn(page, user.apiKey);
  await screen(page, 'IPNS names');
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
  await snapshotOf(page, 'names');

  await screen(page, 'Gateway and tokens');
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
  await snapshotOf(page, 'gateway');

  await screen(page, 'S3');
  expect(await page.getByTestId('s3-access-key-id').textContent()).toBe(user.keyPrefix);
  await page.getByTestId('s3-endpoint').getByText('http').waitFor();
  expect(await page.getByTestId('s3-endpoint').textContent()).toBe(api.deps.config.s3.publicUrl);
  await snapshotOf(page, 's3');
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('usage: the plan limits as bars and the charts after some traffic, their numbers those of the API', async () => {
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

  const { page, problems } = await openConsole();
  await signIn(page, user.apiKey);
  await screen(page, 'Usage');
  const profile = (await call(api, 'GET', '/user/profile', { key: user.apiKey })).body;
  expect(analytics.totals.uploads).toBe(6); // the tests before this one: 5 files, and one for a name
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
  await snapshotOf(page, 'usage');
  expect(problems).toEqual([]);
  await page.close();
}, 60_000);

test('a 200 MiB upload streams from disk: the page memory stays flat, and the CID is Kubo’s; an upload is cancelled mid-way', async () => {
  const size = 200 * 1024 * 1024;
  const file = path.join(tempDir(), 'big.bin');
  const out = fs.createWriteStream(file);
  for await (const chunk of bytes(size, 'console')) if (!out.write(chunk)) await new Promise((r) => out.once('drain', () => r(null)));
  await new Promise((resolve) => out.end(resolve));

  const { page, problems } = await openConsole();
  await signIn(page, user.apiKey);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const heap = async () => {
    const { metrics } = await cdp.send('Performance.getMetrics');
    return metrics.find((m) => m.name === 'JSHeapUsedSize')!.value;
  };
  const before = await heap();
  await page.getByLabel('Choose files').setInputFiles(file);
  let peak = before;
  const row = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem').last();
  for (;;) {
    peak = Math.max(peak, await heap());
    const state = await row.getAttribute('data-state');
    if (state === 'done' || state === 'failed') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(await row.getAttribute('data-state')).toBe('done');
  const cid = await row.locator('.cid').textContent();
  expect(cid).toBe(await kuboCid(() => bytes(size, 'console')));
  // The file is 200 MiB; the page's JavaScript heap grew by a small fraction of it at most.
  const grewMiB = (peak - before) / 2 ** 20;
  process.stdout.write(`[console] 200 MiB upload: JS heap ${(before / 2 ** 20).toFixed(1)} MiB before, peak +${grewMiB.toFixed(1)} MiB\n`);
  expect(grewMiB).toBeLessThan(20);

  // Cancel: an upload slowed to 1 MiB/s is cancelled mid-way; no file of it is recorded.
  const slow = path.join(tempDir(), 'cancel-me.bin');
  fs.writeFileSync(slow, await collect(bytes(8 * 1024 * 1024, 'cancel')));
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 2 ** 20 });
  await page.getByLabel('Choose files').setInputFiles(slow);
  const cancelled = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem').last();
  await eventually(
    async () => Number(await cancelled.getByRole('progressbar').getAttribute('value')),
    (loaded) => loaded > 0,
    20_000,
    'upload started',
  );
  await cancelled.getByRole('button', { name: 'Cancel cancel-me.bin' }).click();
  await page.locator('.tasks li[data-state="cancelled"]').waitFor();
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  await new Promise((r) => setTimeout(r, 1000));
  expect((await call(api, 'GET', '/upload/list?name=cancel-me', { key: user.apiKey })).body.items).toEqual([]);
  expect(problems).toEqual([]);
  await page.close();
}, 300_000);
