// Where scripts/bootstrap.mjs put the stack's commands: the same rule as its binDir(),
// ${STUPA_CACHE_DIR:-~/.cache/stupa}/bin/<component>-<version>[+p<hash of its patches and main module>]/<command>.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../infra/paths.js';

type Component = {
  module: string;
  version: string;
  patches?: string[];
  /** A Go module of ours the commands are built from, with `module` replaced by the patched copy. */
  main?: string;
  commands: Record<string, string>;
};
interface Manifest {
  components: Record<string, Component>;
  /** Built by `npm run bench` only (bootstrap --bench): servers the benchmarks compare with. */
  benchComponents: Record<string, Component>;
}

function readManifest(): Manifest {
  return JSON.parse(fs.readFileSync(path.join(projectRoot, 'stack/versions.json'), 'utf8')) as Manifest;
}

export function cacheDir(): string {
  return process.env.STUPA_CACHE_DIR || path.join(os.homedir(), '.cache', 'stupa');
}

/** The files of our module `main` its build uses, sorted: go.mod, go.sum, .go files but tests. */
function mainFiles(dir: string): string[] {
  const files: string[] = [];
  const walk = (rel: string) => {
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
 * the patches and of that module's mainFiles): a change of either is a new build.
 */
function buildName(spec: Component): string {
  if (!spec.patches?.length && !spec.main) return spec.version;
  const hash = crypto.createHash('sha256');
  for (const patch of spec.patches ?? []) hash.update(fs.readFileSync(path.join(projectRoot, patch)));
  if (spec.main) {
    for (const file of mainFiles(path.join(projectRoot, spec.main))) {
      hash.update(`${file}\0`).update(fs.readFileSync(path.join(projectRoot, spec.main, file)));
    }
  }
  return `${spec.version}+p${hash.digest('hex').slice(0, 10)}`;
}

/** Absolute path of a built command; throws telling how to build it when it is missing. */
export function binaryPath(component: string, command: string): string {
  const manifest = readManifest();
  const spec = manifest.components[component] ?? manifest.benchComponents[component];
  if (!spec?.commands[command]) throw new Error(`stack/versions.json has no command "${command}" for component "${component}"`);
  const file = path.join(cacheDir(), 'bin', `${component}-${buildName(spec)}`, command);
  if (!fs.existsSync(file)) {
    throw new Error(
      `${command} ${spec.version} is not built (${file} is missing): run \`node scripts/bootstrap.mjs\` ` +
        `(npm start and npm test run it too); the first build takes several minutes and needs Go`,
    );
  }
  return file;
}
