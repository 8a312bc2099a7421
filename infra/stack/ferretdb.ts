// FerretDB 1.24 on SQLite: the default MongoDB-protocol server of the local stack.
import fs from 'node:fs';
import path from 'node:path';
import mongoose from 'mongoose';
import { binaryPath } from './binaries.js';
import { launch, waitHealthy, type Managed } from './process.js';

export interface FerretDb {
  uri: string;
  process: Managed;
}

export async function startFerretDb(options: { dataDir: string; logDir: string; port: number; debugPort: number }): Promise<FerretDb> {
  const dir = path.join(options.dataDir, 'sqlite');
  fs.mkdirSync(dir, { recursive: true });
  const proc = launch(
    'ferretdb',
    binaryPath('ferretdb', 'ferretdb'),
    [
      '--handler=sqlite',
      `--sqlite-url=file:${dir}/`,
      `--state-dir=${options.dataDir}`,
      `--listen-addr=127.0.0.1:${options.port}`,
      // Its metrics/profiling listener defaults to 127.0.0.1:8088; give it its own port so
      // two stacks can run side by side.
      `--debug-addr=127.0.0.1:${options.debugPort}`,
      '--telemetry=disable',
      '--log-level=warn',
    ],
    { logDir: options.logDir },
  );
  const uri = `mongodb://127.0.0.1:${options.port}/stupa`;
  try {
    await waitHealthy(proc, async () => {
      const conn = await mongoose.createConnection(uri, { serverSelectionTimeoutMS: 1000 }).asPromise();
      try {
        await conn.db!.admin().ping();
      } finally {
        await conn.close();
      }
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { uri, process: proc };
}
