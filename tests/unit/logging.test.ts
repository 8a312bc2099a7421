// Log lines: readable at a terminal, JSON lines anywhere else (a pipe, a file, a collector), and
// LOG_FORMAT decides when set. Each case runs a real process; `script` gives it a terminal.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-logging-'));
const probe = path.join(dir, 'probe.ts');
const root = process.cwd();

// The configuration decides the format once (infra/config.ts), as api/main.ts and
// workers/main.ts use it; the line carries a credential that must never be written.
fs.writeFileSync(
  probe,
  `import { loadConfig } from ${JSON.stringify(path.join(root, 'infra/config.js'))};
import { createLogger } from ${JSON.stringify(path.join(root, 'infra/logger.js'))};
const env = { MASTER_KEY: 'ab'.repeat(32), DATA_DIR: ${JSON.stringify(dir)}, LOG_FORMAT: process.env.LOG_FORMAT };
const config = loadConfig(env, []);
createLogger('info', 'probe', config.logFormat).info({ apiKey: 'stp_secret', uploads: 3 }, 'hello there');
`,
);
const nodeArgs = ['--import', 'tsx', probe];

/** The text without the terminal's colour codes (ESC [ … m). */
const uncoloured = (text: string) => text.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '');

async function run(terminal: boolean, logFormat?: string): Promise<string> {
  const env = { ...process.env, LOG_FORMAT: logFormat };
  if (logFormat === undefined) delete env.LOG_FORMAT;
  if (!terminal) return (await exec(process.execPath, nodeArgs, { env })).stdout;
  // util-linux's script runs the command on a new pseudo-terminal and copies what it prints.
  const command = [process.execPath, ...nodeArgs].map((a) => `'${a}'`).join(' ');
  return (await exec('script', ['-qec', command, '/dev/null'], { env })).stdout;
}

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('piped: one JSON line a record, the credential removed', async () => {
  const out = await run(false);
  const lines = out.trim().split('\n');
  expect(lines).toHaveLength(1);
  const record = JSON.parse(lines[0]!);
  expect(record).toMatchObject({ level: 30, name: 'probe', uploads: 3, msg: 'hello there' });
  expect(record).not.toHaveProperty('apiKey');
}, 30_000);

test('at a terminal: a readable line with the level, the name and the message, the credential removed', async () => {
  const out = await run(true);
  const plain = uncoloured(out);
  expect(plain).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(probe\): hello there\r?\n\s+uploads: 3/m);
  expect(plain).not.toContain('{"level"');
  expect(plain).not.toContain('stp_secret');
}, 30_000);

test('LOG_FORMAT overrides the terminal either way, and a bad value stops the start', async () => {
  const json = await run(true, 'json');
  expect(JSON.parse(json.trim())).toMatchObject({ msg: 'hello there' });
  const pretty = await run(false, 'pretty');
  expect(uncoloured(pretty)).toMatch(/INFO \(probe\): hello there/);
  await expect(run(false, 'yaml')).rejects.toMatchObject({ stderr: expect.stringMatching(/LOG_FORMAT/) });
}, 30_000);
