// `npm start`: the whole service on the embedded local stack. Starts FerretDB, Temporal
// (with its Web UI), Kubo and an IPFS Cluster peer (each unless its URL is configured),
// then one worker and one REST API process wired to them, and prints where everything is.
// Ctrl-C or SIGTERM stops all of it; data stays in DATA_DIR for the next start.
// `--stack-only` (npm run stack) starts only the stack, for running `npm run api` and
// `npm run worker` by hand.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { masterKeyFile } from '../config.js';
import { DEFAULT_API_HOST, DEFAULT_API_PORT, DEFAULT_DATA_DIR, DEFAULT_STACK_PORT_BASE } from '../constants.js';
import { projectRoot } from '../paths.js';
import { newMasterKey } from '../secrets.js';
import { startStack } from './stack.js';

const stackOnly = process.argv.includes('--stack-only');
const dataDir = path.resolve(process.env.DATA_DIR || DEFAULT_DATA_DIR);
const portBase = Number(process.env.STACK_PORT_BASE || DEFAULT_STACK_PORT_BASE);

function say(line: string): void {
  process.stderr.write(`[stupa] ${line}\n`);
}

/** A development stack keeps its own master key; production sets MASTER_KEY. */
function ensureMasterKey(): void {
  if (process.env.MASTER_KEY || fs.existsSync(masterKeyFile(dataDir))) return;
  fs.writeFileSync(masterKeyFile(dataDir), `${newMasterKey()}\n`, { mode: 0o600 });
  say(`generated a master key in ${masterKeyFile(dataDir)} (set MASTER_KEY in production)`);
}

function runService(name: string, entry: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(projectRoot, entry)], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      say(`${name} exited (${signal ?? code}); stopping everything`);
      void shutdown(1);
    }
  });
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

let stopping = false;
let children: ChildProcess[] = [];
let stopStack: () => Promise<void> = async () => undefined;

async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  say('stopping');
  await Promise.all(children.map(stopChild));
  await stopStack();
  say('stopped');
  process.exit(code);
}

async function main(): Promise<void> {
  fs.mkdirSync(dataDir, { recursive: true });
  ensureMasterKey();
  process.once('SIGINT', () => void shutdown(0));
  process.once('SIGTERM', () => void shutdown(0));

  const stack = await startStack({
    dataDir,
    ports: { base: portBase },
    ui: true,
    external: {
      mongodbUri: process.env.MONGODB_URI || undefined,
      temporalAddress: process.env.TEMPORAL_ADDRESS || undefined,
      kuboApiUrl: process.env.KUBO_API_URL || undefined,
      clusterApiUrl: process.env.CLUSTER_API_URL || undefined,
    },
  });
  stopStack = stack.stop;
  const { endpoints } = stack;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    MONGODB_URI: endpoints.mongodbUri,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    KUBO_API_URL: endpoints.kuboApiUrl,
    CLUSTER_API_URL: endpoints.clusterApiUrl,
  };
  const apiUrl = `http://${process.env.API_HOST || DEFAULT_API_HOST}:${process.env.API_PORT || DEFAULT_API_PORT}`;
  if (!stackOnly) {
    children = [runService('worker', 'workers/main.ts', env), runService('api', 'api/main.ts', env)];
  }
  const lines = [
    stackOnly ? 'stack running (no API or worker: npm run api / npm run worker)' : `Stupa is running`,
    ...(stackOnly ? [] : [`  REST API      ${apiUrl}   (OpenAPI: ${apiUrl}/openapi.json, readiness: ${apiUrl}/readyz)`]),
    `  Temporal UI   ${endpoints.temporalUiUrl ?? '(external Temporal: see its own UI)'}`,
    `  Temporal      ${endpoints.temporalAddress}`,
    `  MongoDB       ${endpoints.mongodbUri}`,
    `  Kubo API      ${endpoints.kuboApiUrl}`,
    `  IPFS Cluster  ${endpoints.clusterApiUrl}`,
    `  data          ${dataDir}   (logs in ${path.join(dataDir, 'logs')})`,
    `  started here  ${stack.started.length ? stack.started.join(', ') : 'nothing (all four are external)'}`,
    `first user:     npm run admin -- users create --email you@example.com --name You`,
    `Ctrl-C stops everything.`,
  ];
  say(lines.join('\n         '));
}

main().catch(async (err) => {
  say(`failed to start: ${(err as Error).message}`);
  await shutdown(1);
});
