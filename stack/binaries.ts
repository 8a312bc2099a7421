// Where scripts/bootstrap.mjs put the stack's commands (the rule is stack/build-name.mjs):
// ${STUPA_CACHE_DIR:-~/.cache/stupa}/bin/<component>-<version>[+p<hash of its patches and main module>]/<command>.
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../infra/paths.js';
import { binDir } from './build-name.mjs';

export { cacheDir } from './build-name.mjs';

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

export function binaryPath(component: string, command: string): string {
  const manifest = readManifest();
  const spec = manifest.components[component] ?? manifest.benchComponents[component];
  if (!spec?.commands[command]) throw new Error(`stack/versions.json has no command "${command}" for component "${component}"`);
  const file = path.join(binDir(projectRoot, component, spec), command);
  if (!fs.existsSync(file)) {
    throw new Error(
      `${command} ${spec.version} is not built (${file} is missing): run \`node scripts/bootstrap.mjs\` ` +
        `(npm start and npm test run it too); the first build takes several minutes and needs Go`,
    );
  }
  return file;
}
