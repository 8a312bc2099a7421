// The web console (/console/) driven in headless Chromium as a user drives it, against the real
// stack: its files, pins and keys screens, checked against what the API, Kubo and Cluster then
// hold (tests/console-account.test.ts has the others). Accessibility is checked with axe-core on
// every screen, and the main actions from the keyboard.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import type { ApiServer } from '../api/server.js';
import { launchBrowser } from './support/browser.js';
import { consolePages, type ConsolePages } from './support/console.js';
import { bytes, collect, kubo, kuboCid } from './support/content.js';
import { startSecondNode } from './support/second-node.js';
import { call, createUser, startTestApi, tempDir, type TestUser } from './support/stack.js';
import { eventually, startWorkerProcess, testTaskQueue, type WorkerProcess } from './support/worker.js';

let api: ApiServer;
let worker: WorkerProcess;
let browser: Browser;
let second: Awaited<ReturnType<typeof startSecondNode>>;
let user: TestUser;
let pages: ConsolePages;
const queue = testTaskQueue();

beforeAll(async () => {
  const env = { TEMPORAL_TASK_QUEUE: queue };
  [api, worker, browser, second] = await Promise.all([startTestApi(env), startWorkerProcess(env), launchBrowser(), startSecondNode()]);
  user = await createUser(api, 'karma');
  pages = consolePages(browser, api.url);
});
afterAll(async () => {
  await Promise.all([api?.close(), worker?.kill(), browser?.close(), second?.node.stop()]);
});

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

  const { page, problems } = await pages.openConsole();
  expect(new URL(page.url()).pathname).toBe('/console/');
  await page.getByLabel('API key').fill('stp_notakeyatallnotakeyatallnotakey');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  expect(await page.getByRole('alert').textContent()).toMatch(/\(UNAUTHORIZED\)$/);
  await pages.snapshotOf(page, 'sign-in');
  // The key is kept in the tab's sessionStorage only, never in a cookie.
  await pages.signIn(page, user.apiKey);
  expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('stupa.apiKey'))).toBe(user.apiKey);
  expect(await page.context().cookies()).toEqual([]);
  expect(problems).toEqual([]);
  await page.close();
});

test('files: a folder, three files and a nested directory dropped, another directory picked, with Kubo-identical CIDs, then a snapshot', async () => {
  const { page, problems } = await pages.openConsole();
  await pages.signIn(page, user.apiKey);
  await page.getByLabel('New folder').fill('site');
  await page.getByRole('button', { name: 'Create folder' }).click();
  await page.getByRole('link', { name: 'site' }).click();
  await page.getByRole('navigation', { name: 'Folder path' }).getByRole('link', { name: 'site' }).waitFor();
  const folderId = new URL(page.url().replace('#/', '')).searchParams.get('folder')!;
  expect(folderId).toMatch(/^fld_/);

  // Three files and a nested directory (www/index.html, www/css/site.css) dragged from the
  // disk onto the drop zone: the browser's own drag and drop, driven by its devtools protocol.
  const texts = ['alpha '.repeat(100), 'beta '.repeat(2000), `gamma ${Date.now()}`];
  const disk = tempDir();
  const dropped = texts.map((t, i) => {
    const file = path.join(disk, `dropped-${i}.txt`);
    fs.writeFileSync(file, t);
    return file;
  });
  const www = path.join(disk, 'www');
  fs.mkdirSync(path.join(www, 'css'), { recursive: true });
  fs.writeFileSync(path.join(www, 'index.html'), '<h1>hello</h1>');
  fs.writeFileSync(path.join(www, 'css', 'site.css'), 'h1 { color: red }');
  const zone = (await page.getByTestId('dropzone').boundingBox())!;
  const at = { x: zone.x + zone.width / 2, y: zone.y + zone.height / 2 };
  const cdp = await page.context().newCDPSession(page);
  const data = { items: [], files: [...dropped, www], dragOperationsMask: 1 };
  for (const type of ['dragEnter', 'dragOver', 'drop'] as const) await cdp.send('Input.dispatchDragEvent', { type, ...at, data });
  // Another directory with the folder picker: assets/img/logo.txt.
  const assets = path.join(disk, 'assets');
  fs.mkdirSync(path.join(assets, 'img'), { recursive: true });
  fs.writeFileSync(path.join(assets, 'img', 'logo.txt'), 'a logo');
  await page.getByLabel('Choose a folder').setInputFiles(assets);

  const rows = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem');
  await eventually(
    () => rows.evaluateAll((items) => items.map((li) => li.getAttribute('data-state'))),
    (states) => states.length === 6 && states.every((s) => s === 'done'),
    30_000,
    'six uploads done',
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
  expected.set('assets/img/logo.txt', 'a logo');
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
  // The directories became folders: www and assets under site, css and img below them.
  const children = async (parent: string) =>
    Object.fromEntries(
      (await call(api, 'GET', `/folders?parentFolderId=${parent}`, { key: user.apiKey })).body.items.map((f: any) => [
        f.name,
        { id: f.folderId, files: f.fileCount },
      ]),
    );
  const top = await children(folderId);
  expect(Object.keys(top).sort()).toEqual(['assets', 'www']);
  expect([top.www.files, top.assets.files]).toEqual([1, 0]);
  expect(Object.entries(await children(top.www.id)).map(([name, f]: any) => [name, f.files])).toEqual([['css', 1]]);
  expect(Object.entries(await children(top.assets.id)).map(([name, f]: any) => [name, f.files])).toEqual([['img', 1]]);
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
  await pages.snapshotOf(page, 'files');
  expect(problems).toEqual([]);
  await page.close();
}, 180_000);

test('pins: a CID only a second node has, pinned with that node as origin, followed live to pinned; a bad CID is explained', async () => {
  const content = `only on the second node ${Date.now()}`;
  const added = await second.client.add(Buffer.from(content), { cidVersion: 1, rawLeaves: true });
  const cid = added.cid.toString();
  const { page, problems } = await pages.openConsole();
  await pages.signIn(page, user.apiKey);
  await pages.screen(page, 'Pins');
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
  await pages.snapshotOf(page, 'pins');

  await row.getByRole('button', { name: `Delete pin ${cid}` }).click();
  await row.getByRole('button', { name: `Confirm deleting pin ${cid}` }).click();
  await row.waitFor({ state: 'detached' });
  expect((await call(api, 'GET', `/pins/${cid}`, { key: user.apiKey })).status).toBe(404);
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('keys from the keyboard alone: created and shown once, then deleted; a revoked key sends the page back to the prompt', async () => {
  const { page, problems } = await pages.openConsole();
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
  await pages.snapshotOf(page, 'keys');
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
  await pages.screen(page, 'Files').catch(() => undefined);
  await page.getByLabel('API key').waitFor();
  expect(await page.getByRole('alert').textContent()).toContain('no longer accepts this key');
  expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('stupa.apiKey'))).toBeNull();
  expect(problems).toEqual([]);
  await page.close();
}, 120_000);

test('a 200 MiB upload streams from disk: the page memory stays flat, and the CID is Kubo’s; an upload is cancelled mid-way', async () => {
  const size = 200 * 1024 * 1024;
  const file = path.join(tempDir(), 'big.bin');
  const out = fs.createWriteStream(file);
  for await (const chunk of bytes(size, 'console')) if (!out.write(chunk)) await new Promise((r) => out.once('drain', () => r(null)));
  await new Promise((resolve) => out.end(resolve));

  const { page, problems } = await pages.openConsole();
  await pages.signIn(page, user.apiKey);
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
