// Where scripts/bootstrap.mjs put the stack's commands: the same rule as its binDir(),
// ${STUPA_CACHE_DIR:-~/.cache/stupa}/bin/<component>-<version>[+p<hash of its patches and overlay>]/<command>.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../paths.js';

type Component = {
  module: string;
  version: string;
  patches?: string[];
  /** Files of ours added to the module's source before the build: its path → ours. */
  overlay?: Record<string, string>;
  commands: Record<string, string>;
};
interface Manifest {
  components: Record<string, Component>;
  /** Built by `npm run bench` only (bootstrap --bench): servers the benchmarks compare with. */
  benchComponents: Record<string, Component>;
}

function readManifest(): Manifest {
  return JSON.parse(fs.readFileSync(path.join(projectRoot, 'infra/stack/versions.json'), 'utf8')) as Manifest;
}

export function cacheDir(): string {
  return process.env.STUPA_CACHE_DIR || path.join(os.homedir(), '.cache', 'stupa');
}

/** `v1.2.3`, or `v1.2.3+p<hash>` for a build with patches or an overlay: a change of either is a new build. */
function buildName(spec: Component): string {
  const overlay = Object.entries(spec.overlay ?? {});
  if (!spec.patches?.length && overlay.length === 0) return spec.version;
  const hash = crypto.createHash('sha256');
  for (const patch of spec.patches ?? []) hash.update(fs.readFileSync(path.join(projectRoot, patch)));
  for (const [target, ours] of overlay) hash.update(`${target}\0`).update(fs.readFileSync(path.join(projectRoot, ours)));
  return `${spec.version}+p${hash.digest('hex').slice(0, 10)}`;
}

/** Absolute path of a built command; throws telling how to build it when it is missing. */
export function binaryPath(component: string, command: string): string {
  const manifest = readManifest();
  const spec = manifest.components[component] ?? manifest.benchComponents[component];
  if (!spec?.commands[command]) throw new Error(`infra/stack/versions.json has no command "${command}" for component "${component}"`);
  const file = path.join(cacheDir(), 'bin', `${component}-${buildName(spec)}`, command);
  if (!fs.existsSync(file)) {
    throw new Error(
      `${command} ${spec.version} is not built (${file} is missing): run \`node scripts/bootstrap.mjs\` ` +
        `(npm start and npm test run it too); the first build takes several minutes and needs Go`,
    );
  }
  return file;
}
