// Where scripts/bootstrap.mjs put the stack's commands (same rule as there).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../paths.js';

interface Manifest {
  components: Record<string, { module: string; version: string; commands: Record<string, string> }>;
}

const manifest = JSON.parse(fs.readFileSync(path.join(projectRoot, 'infra/stack/versions.json'), 'utf8')) as Manifest;

export function binaryPath(component: string, command: string): string {
  const spec = manifest.components[component];
  if (!spec || !spec.commands[command]) throw new Error(`unknown stack command ${component}/${command}`);
  const cacheDir = process.env.STUPA_CACHE_DIR || path.join(os.homedir(), '.cache', 'stupa');
  const file = path.join(cacheDir, 'bin', `${component}-${spec.version}`, command);
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run node scripts/bootstrap.mjs to build the stack`);
  return file;
}
