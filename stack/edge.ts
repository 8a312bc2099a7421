// Starts the edge (Caddy, edge/caddyfile.ts) for npm start, the tests and the bench: its
// configuration in DATA_DIR/edge/Caddyfile, its certificates and local CA under
// DATA_DIR/edge/data, its log in DATA_DIR/logs/edge.log.
import fs from 'node:fs';
import path from 'node:path';
import { edgeCaddyfile, type EdgeOptions } from '../edge/caddyfile.js';
import { binaryPath } from './binaries.js';
import { canConnect } from './ports.js';
import { startProcess, writeFileAtomic, type ManagedProcess } from './process.js';

export type { EdgeOptions, EdgeTls, EdgeUpstream } from '../edge/caddyfile.js';

export interface Edge {
  process: ManagedProcess;
  /** The generated configuration (DATA_DIR/edge/Caddyfile). */
  configFile: string;
  /** The local CA's root certificate, with `tls.mode` internal. */
  caFile: string | null;
  stop(): Promise<void>;
}

/** Starts Caddy with the configuration for `options` and waits until its public port answers. */
export async function startEdge(
  options: EdgeOptions & { dataDir: string; signal?: AbortSignal; onSpawn?: (pid: number) => void },
): Promise<Edge> {
  const dir = path.join(options.dataDir, 'edge');
  fs.mkdirSync(dir, { recursive: true });
  const configFile = path.join(dir, 'Caddyfile');
  writeFileAtomic(configFile, edgeCaddyfile(options));
  const process = startProcess({
    name: 'edge',
    command: binaryPath('caddy', 'caddy'),
    args: ['run', '--config', configFile, '--adapter', 'caddyfile'],
    logDir: path.join(options.dataDir, 'logs'),
    cwd: dir,
    // Caddy keeps certificates and its CA under XDG_DATA_HOME/caddy, never in the user's home.
    env: { XDG_DATA_HOME: path.join(dir, 'data'), XDG_CONFIG_HOME: path.join(dir, 'config'), HOME: dir },
    onSpawn: options.onSpawn,
  });
  try {
    await process.waitFor(
      async () => {
        if (!(await canConnect(options.ports.api))) throw new Error('not listening yet');
      },
      { timeoutMs: 20_000, what: 'the edge (Caddy)', signal: options.signal },
    );
  } catch (err) {
    await process.stop();
    throw err;
  }
  return {
    process,
    configFile,
    caFile: options.tls?.mode === 'internal' ? path.join(dir, 'data/caddy/pki/authorities/local/root.crt') : null,
    stop: () => process.stop(5000),
  };
}
