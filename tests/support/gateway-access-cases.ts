// Who may read an account's gateway, run against the API's own gateway (gateway-access.test.ts)
// and through the edge (gateway-access-edge.test.ts): gateway tokens (required, by query or
// header, expired, deleted by prefix), the IP allowlist, and allowed origins, the last in a
// real browser (headless Chromium) where CORS is the browser's own rule.
import http from 'node:http';
import type { Browser } from 'playwright-core';
import type { ApiServer } from '../../api/server.js';
import { launchBrowser, serveOrigin } from './browser.js';
import { call, createUser, errorReason, startTestApi, type TestUser } from './stack.js';
import { startEdgedApi, type EdgedApi } from './edge.js';

export function gatewayAccessCases(through: 'api' | 'edge'): void {
  let api: ApiServer;
  let edged: EdgedApi | undefined;
  let browser: Browser;

  beforeAll(async () => {
    if (through === 'edge') edged = await startEdgedApi();
    [api, browser] = await Promise.all([edged ? edged.api : startTestApi(), launchBrowser()]);
  });
  afterAll(async () => {
    await Promise.all([edged ? edged.close() : api?.close(), browser?.close()]);
  });

  /** The gateway's address: the API's own, or the edge's. */
  const gatewayBase = () => (edged ? `http://127.0.0.1:${edged.ports.gateway}` : api.gatewayUrl);

  async function account(): Promise<{ user: TestUser; slug: string; cid: string }> {
    const user = await createUser(api);
    const slug = (await api.deps.db.users.get(user.userId))!.gatewaySlug!;
    const res = await call(api, 'POST', '/upload/new', { key: user.apiKey, body: { content: `content of ${slug}` } });
    return { user, slug, cid: res.body.cid };
  }

  function gw(
    slug: string,
    path: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
    const url = new URL(gatewayBase());
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          headers: { Host: `${slug}.localhost:${url.port}`, Accept: 'application/json', ...headers },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  const settings = (user: TestUser, body: object) => call(api, 'PUT', '/gateway-settings', { key: user.apiKey, body });

  test('settings are validated, normalised, and shown in the profile', async () => {
    const { user, slug } = await account();
    for (const body of [
      { ipAllowlist: ['not-an-ip'] },
      { allowedOrigins: ['https://x.example/path'] },
      { tokenRequired: 'yes' },
      { other: 1 },
    ]) {
      expect((await settings(user, body)).status).toBe(400);
    }
    const res = await settings(user, { ipAllowlist: ['127.0.0.1', '10.0.0.0/8', '::1'], allowedOrigins: ['https://app.example.com'] });
    expect(res.body).toEqual({
      tokenRequired: false,
      ipAllowlist: ['127.0.0.1', '10.0.0.0/8', '::1'],
      allowedOrigins: ['https://app.example.com'],
    });
    const profile = await call(api, 'GET', '/user/profile', { key: user.apiKey });
    expect(profile.body).toMatchObject({
      gatewaySlug: slug,
      gatewayUrl: `http://${slug}.localhost:${new URL(gatewayBase()).port}`,
      gatewayTokenRequired: false,
      gatewayIpAllowlist: ['127.0.0.1', '10.0.0.0/8', '::1'],
      gatewayAllowedOrigins: ['https://app.example.com'],
    });
  });

  test('a required token: by query or header; wrong, expired and deleted ones are 401', async () => {
    const { user, slug, cid } = await account();
    const made = await call(api, 'POST', '/gateway-tokens', { key: user.apiKey, body: { name: 'site' } });
    expect(made.status).toBe(201);
    const { token, tokenPrefix } = made.body as { token: string; tokenPrefix: string };
    expect(token).toMatch(/^gwt_[0-9A-Za-z]{32}$/);
    expect(tokenPrefix).toBe(token.slice(0, 12));
    expect((await gw(slug, `/ipfs/${cid}`)).status).toBe(200); // not required yet
    await settings(user, { tokenRequired: true });
    const none = await gw(slug, `/ipfs/${cid}`);
    expect([none.status, JSON.parse(none.body).error.reason]).toEqual([401, 'UNAUTHORIZED']);
    expect((await gw(slug, `/ipfs/${cid}?token=${token}`)).status).toBe(200);
    expect((await gw(slug, `/ipfs/${cid}`, { 'X-Gateway-Token': token })).body).toMatch(/^content of/);
    expect((await gw(slug, `/ipfs/${cid}?token=gwt_${'x'.repeat(32)}`)).status).toBe(401);
    // Another account's token does not open this gateway.
    const stranger = await account();
    const theirs = (await call(api, 'POST', '/gateway-tokens', { key: stranger.user.apiKey, body: { name: 'x' } })).body.token;
    expect((await gw(slug, `/ipfs/${cid}?token=${theirs}`)).status).toBe(401);
    // Listed without the token; lastUsedAt set.
    const list = await call(api, 'GET', '/gateway-tokens', { key: user.apiKey });
    expect(list.body).toEqual([
      { tokenPrefix, name: 'site', createdAt: expect.any(Number), lastUsedAt: expect.any(Number), expiresAt: null },
    ]);
    expect(JSON.stringify(list.body)).not.toContain(token);
    // An expired token.
    const old = (await call(api, 'POST', '/gateway-tokens', { key: user.apiKey, body: { name: 'old', expiresIn: 60 } })).body;
    await api.deps.db.gatewayTokens.model.updateOne({ _id: old.tokenPrefix }, { $set: { expiresAt: Date.now() - 1 } }).exec();
    expect((await gw(slug, `/ipfs/${cid}?token=${old.token}`)).status).toBe(401);
    // Deleted by prefix: at once. Another account cannot delete it.
    expect((await call(api, 'DELETE', `/gateway-tokens/${tokenPrefix}`, { key: stranger.user.apiKey })).status).toBe(404);
    const deleted = await call(api, 'DELETE', `/gateway-tokens/${tokenPrefix}`, { key: user.apiKey });
    expect(deleted.body).toEqual({ success: true, tokenPrefix });
    expect((await gw(slug, `/ipfs/${cid}?token=${token}`)).status).toBe(401);
    const gone = await call(api, 'DELETE', `/gateway-tokens/${tokenPrefix}`, { key: user.apiKey });
    expect([gone.status, errorReason(gone)]).toEqual([404, 'NOT_FOUND']);
  });

  test('an IP outside the allowlist is 403; inside (address or range) it serves', async () => {
    const { user, slug, cid } = await account();
    await settings(user, { ipAllowlist: ['10.0.0.0/8'] });
    const refused = await gw(slug, `/ipfs/${cid}`);
    expect([refused.status, JSON.parse(refused.body).error.reason]).toEqual([403, 'IP_NOT_ALLOWED']);
    await settings(user, { ipAllowlist: ['10.0.0.0/8', '127.0.0.0/24'] });
    expect((await gw(slug, `/ipfs/${cid}`)).status).toBe(200);
    await settings(user, { ipAllowlist: [] });
    expect((await gw(slug, `/ipfs/${cid}`)).status).toBe(200);
  });

  test('allowed origins: CORS headers for listed origins only, and a browser honours them', async () => {
    const { user, slug, cid } = await account();
    const allowedPage = await serveOrigin('<!doctype html><title>allowed</title>');
    const otherPage = await serveOrigin('<!doctype html><title>other</title>');
    const allowed = new URL(allowedPage.url).origin;
    try {
      // No list: every origin may read.
      expect((await gw(slug, `/ipfs/${cid}`, { Origin: 'https://anyone.example' })).headers['access-control-allow-origin']).toBe('*');
      await settings(user, { allowedOrigins: [allowed] });
      const listed = await gw(slug, `/ipfs/${cid}`, { Origin: allowed });
      expect([listed.headers['access-control-allow-origin'], listed.headers.vary]).toEqual([allowed, 'Origin']);
      expect((await gw(slug, `/ipfs/${cid}`, { Origin: 'https://evil.example' })).headers['access-control-allow-origin']).toBeUndefined();

      const gatewayUrl = `http://${slug}.localhost:${new URL(gatewayBase()).port}/ipfs/${cid}`;
      const read = async (pageUrl: string) => {
        const page = await browser.newPage();
        try {
          await page.goto(pageUrl);
          return await page.evaluate(async (url) => {
            try {
              const res = await fetch(url);
              return `${res.status} ${await res.text()}`;
            } catch (err) {
              return `blocked: ${String(err)}`;
            }
          }, gatewayUrl);
        } finally {
          await page.close();
        }
      };
      expect(await read(allowedPage.url)).toBe(`200 content of ${slug}`);
      expect(await read(otherPage.url)).toMatch(/^blocked: TypeError/);
    } finally {
      await Promise.all([allowedPage.close(), otherPage.close()]);
    }
  });

  test("a folder's CORS document decides under /folders/<name>, preflights included", async () => {
    const { user, slug } = await account();
    const folder = await call(api, 'POST', '/folders', { key: user.apiKey, body: { name: 'bucket' } });
    const rules = {
      CORSRules: [{ AllowedOrigins: ['https://shop.example'], AllowedMethods: ['GET'], AllowedHeaders: ['range'], MaxAgeSeconds: 120 }],
    };
    expect((await call(api, 'PUT', `/folders/${folder.body.folderId}/cors`, { key: user.apiKey, body: rules })).status).toBe(200);
    const preflight = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const url = new URL(gatewayBase());
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'OPTIONS',
          path: '/folders/bucket/a.txt',
          headers: {
            Host: `${slug}.localhost:${url.port}`,
            Origin: 'https://shop.example',
            'Access-Control-Request-Method': 'GET',
            'Access-Control-Request-Headers': 'Range',
          },
        },
        resolve,
      );
      req.on('error', reject);
      req.end();
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers).toMatchObject({
      'access-control-allow-origin': 'https://shop.example',
      'access-control-allow-methods': 'GET',
      'access-control-allow-headers': 'Range',
      'access-control-max-age': '120',
    });
    // The document, not the account's (empty, so permissive) allowedOrigins, decides here.
    const other = await gw(slug, '/folders/bucket/a.txt', { Origin: 'https://elsewhere.example' });
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const shop = await gw(slug, '/folders/bucket/a.txt', { Origin: 'https://shop.example' });
    expect(shop.headers['access-control-allow-origin']).toBe('https://shop.example');
    // Outside the folder, the account's settings still apply.
    expect(
      (await gw(slug, '/ipfs/bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e', { Origin: 'https://elsewhere.example' }))
        .headers['access-control-allow-origin'],
    ).toBe('*');
  });

  test("past the plan's gateway bandwidth the gateway answers 429 with Retry-After until the next month", async () => {
    const { user, slug, cid } = await account();
    // The plan's whole month spent, recorded as the gateway records it.
    const plan = api.deps.config.plans.get('dharma');
    await api.deps.db.analytics.record(user.userId, Date.now(), { gatewayBytes: plan.gatewayBandwidthMB * 2 ** 20 });
    const res = await gw(slug, `/ipfs/${cid}`);
    expect([res.status, JSON.parse(res.body).error.reason]).toEqual([429, 'GATEWAY_BANDWIDTH_LIMIT']);
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan((nextMonth - Date.now()) / 1000 - 60);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(Math.ceil((nextMonth - Date.now()) / 1000) + 1);
  });
}
