// A real browser for tests where the browser's own rules matter (CORS): Debian's Chromium,
// headless, driven by playwright-core. `npm test` installs Chromium when it is missing
// (scripts/bootstrap.mjs --browser); CHROMIUM_PATH points at another one.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';

export function chromiumPath(): string {
  const found = process.env.CHROMIUM_PATH || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
  if (!found) throw new Error("no Chromium: run the tests with npm test (it installs Debian's chromium) or set CHROMIUM_PATH");
  return found;
}

export const launchBrowser = (): Promise<Browser> =>
  chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox', '--disable-gpu'] });

/** A page on an origin of its own (another port of 127.0.0.1), for cross-origin requests. */
export async function serveOrigin(html: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(html));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
