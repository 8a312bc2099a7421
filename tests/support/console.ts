// Driving the web console in a test: open it (collecting script errors and CSP violations),
// sign in, go to a screen, and check a screen with axe-core (and screenshot it into
// CONSOLE_SCREENSHOTS, a folder, when that is set).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';

const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const shots = process.env.CONSOLE_SCREENSHOTS;

/** axe-core's serious and critical findings on the page as it is (none expected). */
async function accessibilityProblems(page: Page): Promise<string[]> {
  // Evaluated by the browser's debugging protocol, which the page's CSP does not govern.
  await page.evaluate(axeSource);
  const results = await page.evaluate(() => (globalThis as any).axe.run((globalThis as any).document, { resultTypes: ['violations'] }));
  return (results.violations as any[])
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
}

export type ConsolePages = ReturnType<typeof consolePages>;

export function consolePages(browser: Browser, apiUrl: string) {
  return {
    /** A page with the console open, and the script errors and CSP violations it logs. */
    async openConsole(): Promise<{ page: Page; problems: string[] }> {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        // A refused request logs itself; what matters is scripts and the policy.
        if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) problems.push(msg.text());
      });
      await page.goto(`${apiUrl}/console`);
      return { page, problems };
    },

    async signIn(page: Page, key: string): Promise<void> {
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
    },

    async screen(page: Page, name: string): Promise<void> {
      await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name }).click();
      await page.getByRole('heading', { level: 1, name }).waitFor();
    },

    /** No serious or critical accessibility finding on the screen; its screenshot when asked. */
    async snapshotOf(page: Page, name: string): Promise<void> {
      expect(await accessibilityProblems(page)).toEqual([]);
      if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
    },
  };
}
