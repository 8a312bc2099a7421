// The `npm test` driver: an isolated stack (free ports, a temporary directory), jest against
// it, and teardown whatever happens. Only MONGODB_URI is honoured from the environment, so a
// run can use a real MongoDB (with a database of its own) instead of FerretDB.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../paths.js';
import { startStack, type Stack } from './stack.js';

function withDatabase(uri: string, name: string): string {
  const u = new URL(uri);
  u.pathname = `/${name}`;
  return u.toString();
}

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-test-'));
  let stack: Stack | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await stack?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void cleanup().then(() => process.exit(130)));
  }
  try {
    const t = Date.now();
    const mongodbUri = process.env.MONGODB_URI
      ? withDatabase(process.env.MONGODB_URI, `stupa_test_${crypto.randomBytes(4).toString('hex')}`)
      : undefined;
    stack = await startStack({ dataDir, ports: 'free', ui: false, external: { mongodbUri } });
    process.stderr.write(`[test] stack up in ${((Date.now() - t) / 1000).toFixed(1)} s (${dataDir})\n`);
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
    const jest = spawn(
      process.execPath,
      ['--experimental-vm-modules', path.join(projectRoot, 'node_modules/jest/bin/jest.js'), '--runInBand', ...process.argv.slice(2)],
      { cwd: projectRoot, env, stdio: 'inherit' },
    );
    return await new Promise<number>((resolve) => jest.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`[test] ${(err as Error).message}\n`);
    process.exit(1);
  },
);
