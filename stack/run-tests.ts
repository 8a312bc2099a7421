// The `npm test` driver: an isolated stack (free ports, a temporary directory), jest against
// it in a child process, and teardown whatever happens. Only MONGODB_URI is honoured from
// the environment, so a run can use a real MongoDB (with a database of its own) instead of
// FerretDB; everything else is always started fresh, so tests never touch a developer's data.
//   tsx stack/run-tests.ts [jest arguments...]
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mongoose from 'mongoose';
import { projectRoot } from '../infra/paths.js';
import { startStack, type Stack } from './stack.js';

function say(line: string): void {
  process.stderr.write(`[test] ${line}\n`);
}

/** The URI with its database replaced; string surgery, because a multi-host URI is no URL. */
function withDatabase(uri: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?]+)(\/[^?]*)?(\?.*)?$/.exec(uri);
  if (!match) throw new Error(`MONGODB_URI is not a mongodb:// or mongodb+srv:// URI`);
  return `${match[1]}/${database}${match[3] ?? ''}`;
}

async function dropDatabase(uri: string): Promise<void> {
  const conn = await mongoose.createConnection(uri, { serverSelectionTimeoutMS: 5000 }).asPromise();
  try {
    await conn.dropDatabase();
  } finally {
    await conn.close();
  }
}

function exitCode(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? (os.constants.signals[signal] ?? 1) : 1);
}

async function main(): Promise<number> {
  const dataDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'stupa-test-'));
  const abort = new AbortController();
  let jest: ChildProcess | undefined;
  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      // A second Ctrl-C: leave now; process.ts kills the servers as this process exits.
      say(`${signal} again: exiting without cleanup (${dataDir} is left behind)`);
      process.exit(exitCode(null, signal));
    }
    interrupted = signal;
    say(`${signal}: stopping`);
    abort.abort();
    jest?.kill(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  // A database per run, so runs against a shared MongoDB neither see nor break each other.
  const externalMongo = process.env.MONGODB_URI
    ? withDatabase(process.env.MONGODB_URI, `stupa_test_${Date.now()}_${crypto.randomBytes(3).toString('hex')}`)
    : undefined;
  let stack: Stack | undefined;
  try {
    const t = Date.now();
    try {
      stack = await startStack({ dataDir, ports: 'free', ui: false, external: { mongodbUri: externalMongo }, signal: abort.signal });
    } catch (err) {
      if (interrupted) return exitCode(null, interrupted); // the abort's own error says nothing new
      throw err;
    }
    say(`stack up in ${((Date.now() - t) / 1000).toFixed(1)} s (${dataDir})`);
    if (interrupted) return exitCode(null, interrupted);
    const { endpoints } = stack;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      STUPA_TEST_MONGODB_URI: endpoints.mongodbUri,
      STUPA_TEST_TEMPORAL_ADDRESS: endpoints.temporalAddress,
      STUPA_TEST_KUBO_API_URL: endpoints.kuboApiUrl,
      STUPA_TEST_KUBO_GATEWAY_URL: endpoints.kuboGatewayUrl,
      STUPA_TEST_KUBO_SWARM_ADDRESS: endpoints.kuboSwarmAddress,
      STUPA_TEST_CLUSTER_API_URL: endpoints.clusterApiUrl,
      STUPA_TEST_DATA_DIR: dataDir,
    };
    const jestBin = path.join(projectRoot, 'node_modules/jest/bin/jest.js');
    jest = spawn(process.execPath, ['--experimental-vm-modules', jestBin, '--runInBand', ...process.argv.slice(2)], {
      cwd: projectRoot,
      env,
      stdio: 'inherit',
    });
    const child = jest;
    const code = await new Promise<number>((resolve) => {
      child.once('exit', (c, s) => resolve(exitCode(c, s)));
      child.once('error', (err) => {
        say(`jest could not start: ${err.message}`);
        resolve(1);
      });
    });
    return interrupted ? exitCode(null, interrupted) : code;
  } finally {
    const t = Date.now();
    await stack?.stop();
    if (externalMongo) await dropDatabase(externalMongo).catch((err: Error) => say(`could not drop the test database: ${err.message}`));
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (stack) say(`stack stopped in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    say(err.message);
    process.exit(1);
  },
);
