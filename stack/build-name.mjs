// Where a built command of stack/versions.json lives in the cache, in one place for the two
// sides that need it: scripts/bootstrap.mjs, which builds it there, and stack/binaries.ts,
// which starts it from there. Plain Node with no dependencies, because bootstrap runs before
// `npm ci` (its types: build-name.d.mts).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** ${STUPA_CACHE_DIR:-~/.cache/stupa}. */
export function cacheDir(env = process.env) {
  return env.STUPA_CACHE_DIR || path.join(os.homedir(), '.cache', 'stupa');
}

/**
 * The files of a Go module of ours (a component's `main`) that its build uses, by their path in
 * it, sorted: go.mod, go.sum and every .go file but tests. Only these are copied to the build,
 * so a change to any of them is a new build name.
 */
export function mainFiles(dir) {
  const files = [];
  const walk = (rel) => {
    for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const file = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(file);
      else if (file === 'go.mod' || file === 'go.sum' || (file.endsWith('.go') && !file.endsWith('_test.go'))) files.push(file);
    }
  };
  walk('');
  return files.sort();
}

/**
 * `v1.2.3`, or `v1.2.3+p<hash>` for a build with patches or from a module of ours (the hash of
 * the patches and of that module's mainFiles), so a cached build of other sources is never used.
 */
export function buildName(root, spec) {
  if (!spec.patches?.length && !spec.main) return spec.version;
  const hash = crypto.createHash('sha256');
  for (const patch of spec.patches ?? []) hash.update(fs.readFileSync(path.join(root, patch)));
  if (spec.main) {
    for (const file of mainFiles(path.join(root, spec.main))) {
      hash.update(`${file}\0`).update(fs.readFileSync(path.join(root, spec.main, file)));
    }
  }
  return `${spec.version}+p${hash.digest('hex').slice(0, 10)}`;
}

/** The directory of a component's built commands: <cache>/bin/<component>-<build name>. */
export function binDir(root, name, spec, env = process.env) {
  return path.join(cacheDir(env), 'bin', `${name}-${buildName(root, spec)}`);
}
