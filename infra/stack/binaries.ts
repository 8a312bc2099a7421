// Where scripts/bootstrap.mjs put the stack's commands: the same rule as its binDir(),
// ${STUPA_CACHE_DIR:-~/.cache/stupa}/bin/<component>-<version>[+<buildTag>]/<command>.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../paths.js';

interface Manifest {
  components: Record<string, { module: string; version: string; buildTag?: string; commands: Record<string, string> }>;
}

function readManifest(): Manifest {
  return JSON.parse(fs.readFileSync(path.join(projectRoot, 'infra/stack/versions.json'), 'utf8')) as Manifest;
}

export function cacheDir(): string {
  return process.env.STUPA_CACHE_DIR || path.join(os.homedir(), '.cache', 'stupa');
}

/** Absolute path of a built command; throws telling how to build it when it is missing. */
export function binaryPath(component: string, command: string): string {
  const spec = readManifest().components[component];
  if (!spec?.commands[command]) throw new Error(`infra/stack/versions.json has no command "${command}" for component "${component}"`);
  const file = path.join(cacheDir(), 'bin', `${component}-${spec.version}${spec.buildTag ? `+${spec.buildTag}` : ''}`, command);
  if (!fs.existsSync(file)) {
    throw new Error(
      `${command} ${spec.version} is not built (${file} is missing): run \`node scripts/bootstrap.mjs\` ` +
        `(npm start and npm test run it too); the first build takes several minutes and needs Go`,
    );
  }
  return file;
}
