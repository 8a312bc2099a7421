// MinIO, the S3 server users compare with, for the S3 benchmark only: built from its Go module
// by `npm run bench` (versions.json benchComponents), started here on a free loopback port with
// one drive in the bench's directory, and stopped with the bench. Its defaults are kept (as a
// user runs `minio server DIR`), so the comparison is with what MinIO does out of the box.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { binaryPath } from '../../stack/binaries.js';
import { freePorts } from '../../stack/ports.js';
import { startProcess } from '../../stack/process.js';
import type { BenchContext } from './harness.js';

export interface MinioServer {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  pid: number;
}

export async function startMinio(ctx: Pick<BenchContext, 'dataDir' | 'signal' | 'track'>): Promise<MinioServer> {
  const [port, consolePort] = await freePorts(2);
  const drive = path.join(ctx.dataDir, 'minio');
  fs.mkdirSync(drive, { recursive: true });
  const accessKeyId = 'benchminio';
  const secretAccessKey = crypto.randomBytes(16).toString('hex');
  const proc = startProcess({
    name: 'minio',
    command: binaryPath('minio', 'minio'),
    args: ['server', drive, '--address', `127.0.0.1:${port}`, '--console-address', `127.0.0.1:${consolePort}`, '--quiet'],
    logDir: path.join(ctx.dataDir, 'logs'),
    // MINIO_ variables of the caller would configure it; only ours apply.
    dropEnv: ['MINIO_'],
    env: { MINIO_ROOT_USER: accessKeyId, MINIO_ROOT_PASSWORD: secretAccessKey, MINIO_BROWSER: 'off', MINIO_UPDATE: 'off' },
  });
  ctx.track(() => proc.stop());
  const endpoint = `http://127.0.0.1:${port}`;
  await proc.waitFor(
    async () => {
      const res = await fetch(`${endpoint}/minio/health/ready`, { signal: ctx.signal });
      if (res.status !== 200) throw new Error(`ready answered ${res.status}`);
    },
    { timeoutMs: 60_000, what: 'MinIO ready', signal: ctx.signal },
  );
  return { endpoint, accessKeyId, secretAccessKey, pid: proc.pid };
}
