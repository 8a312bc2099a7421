// The docs are part of the product: every relative link in the README, CONTRIBUTING.md and
// docs/ names a file of the repository (and a heading that exists, where it names one), and
// nothing the project ships points outside the repository for what the service implements.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = process.cwd();
const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f !== '' && fs.existsSync(path.join(root, f)));
const pages = tracked.filter((f) => f.endsWith('.md') && (f === 'README.md' || f === 'CONTRIBUTING.md' || f.startsWith('docs/')));

/** The text outside fenced code blocks and inline code, where a `[..](..)` is a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{L}\p{N}\- ]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of fs
    .readFileSync(file, 'utf8')
    .replace(/^```[\s\S]*?^```/gm, '')
    .matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  page: string;
  target: string;
}

function relativeLinks(): Link[] {
  const links: Link[] = [];
  for (const page of pages) {
    const text = prose(fs.readFileSync(path.join(root, page), 'utf8'));
    for (const m of text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('<')) continue; // http:, mailto:, …
      links.push({ page, target });
    }
  }
  return links;
}

function broken(link: Link): string | null {
  const [file, anchor] = link.target.split('#') as [string, string | undefined];
  const resolved = file === '' ? path.join(root, link.page) : path.resolve(root, path.dirname(link.page), decodeURIComponent(file));
  if (!resolved.startsWith(root + path.sep)) return 'points outside the repository';
  if (!fs.existsSync(resolved)) return 'no such file';
  if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) return `no heading #${anchor}`;
  return null;
}

test('the docs tree is there, and the README is a front door: short, with the two commands', () => {
  expect(pages).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/README.md', 'docs/api/contract.md']));
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  expect(readme.split('\n').length).toBeLessThan(200);
  expect(readme).toMatch(/^npm start\b/m);
  expect(readme).toMatch(/^npm test\b/m);
});

test('every relative link in the docs resolves to a file in the repository, and to a heading where it names one', () => {
  const links = relativeLinks();
  expect(links.length).toBeGreaterThan(100);
  const bad = links.map((link) => ({ ...link, problem: broken(link) })).filter((l) => l.problem !== null);
  expect(bad).toEqual([]);
});

test('the checks themselves: a missing file, a missing heading and a link out of the repository are caught', () => {
  expect(broken({ page: 'docs/README.md', target: 'api/no-such-page.md' })).toBe('no such file');
  expect(broken({ page: 'docs/README.md', target: 'api/contract.md#no-such-heading' })).toBe('no heading #no-such-heading');
  expect(broken({ page: 'docs/README.md', target: '../../shared/spec/decisions.md' })).toBe('points outside the repository');
  expect(broken({ page: 'docs/README.md', target: 'api/contract.md#lists' })).toBeNull();
});

// Code comments name the section of docs/api/contract.md they follow, never a file outside
// the repository that a reader of the code does not have.
test('no source file or page points to the contract outside the repository', () => {
  const sources = tracked.filter(
    (f) => /\.(ts|tsx|js|mjs|go|json|ya?ml|md)$/.test(f) && !f.startsWith('node_modules/') && f !== 'package-lock.json',
  );
  const outside = sources.filter((f) =>
    /shared\/spec|\bdecisions\.md|interface-spec\.md/.test(fs.readFileSync(path.join(root, f), 'utf8')),
  );
  expect(outside.filter((f) => f !== 'tests/unit/docs.test.ts')).toEqual([]);
  const sections = anchors(path.join(root, 'docs/api/contract.md'));
  const named = new Set<string>();
  for (const f of sources.filter((s) => /\.(ts|tsx|go)$/.test(s))) {
    for (const m of fs.readFileSync(path.join(root, f), 'utf8').matchAll(/docs\/api\/contract\.md, "([^"]+)"/g)) named.add(m[1]!);
  }
  expect(named.size).toBeGreaterThan(5);
  expect([...named].filter((title) => !sections.has(slug(title)))).toEqual([]);
});
