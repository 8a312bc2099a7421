// The local stack's backup and restore, as `npm run admin -- backup DIR` and `restore DIR` run
// them (api/cli/admin.ts hands these two commands to this file in a process of its own: the
// admin tool is production code, which never imports the local stack). Production backups use
// each engine's own tools: docs/operations/upgrades-and-backups.md.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig, masterKeyFile } from '../infra/config.js';
import { BackupError, backupStack } from './backup.js';
import { restoreStack } from './restore.js';

const usage = `usage: npm run admin -- backup DIR [--json]    an online backup of the running local stack into DIR
       npm run admin -- restore DIR [--json]   a backup into an empty DATA_DIR, the stack stopped`;

function masterKey(dataDir: string): Buffer | undefined {
  if (!process.env.MASTER_KEY && !fs.existsSync(masterKeyFile(dataDir))) return undefined;
  const key = loadConfig(process.env, []).masterKey;
  return key.length > 0 ? key : undefined;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: 'boolean' } } });
  const [command, dir, ...rest] = positionals;
  if (!dir || rest.length > 0 || (command !== 'backup' && command !== 'restore')) {
    process.stderr.write(`${usage}\n`);
    return 2;
  }
  const dataDir = path.resolve(process.env.DATA_DIR || './data');
  const say = (line: string) => void (values.json ? undefined : process.stdout.write(`${command}: ${line}\n`));
  const started = Date.now();
  if (command === 'backup') {
    const key = masterKey(dataDir);
    if (!key) throw new BackupError(`no master key (MASTER_KEY or ${masterKeyFile(dataDir)}): the backup records which key it needs`);
    const manifest = await backupStack({ dataDir, target: dir, masterKey: key, say });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (values.json) process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);
    else
      process.stdout.write(
        `backup of ${dataDir} in ${path.resolve(dir)} (${seconds} s), taken at ${manifest.takenAt}\n` +
          `keep the master key apart from it: the backup never holds it, and a restore needs it\n`,
      );
    return 0;
  }
  const result = await restoreStack({ source: dir, dataDir, masterKey: masterKey(dataDir), say });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (values.json) process.stdout.write(`${JSON.stringify({ ...result, seconds: Number(seconds) }, null, 2)}\n`);
  else
    process.stdout.write(
      `restored the backup of ${result.manifest.takenAt} into ${dataDir} (${seconds} s). Next:\n` +
        `  npm start                               (with this DATA_DIR)\n` +
        `  npm run admin -- check                  what differs; content pinned after the backup is kept\n` +
        `  npm run admin -- check --repair         pins Kubo again from Cluster's restored pin set\n`,
    );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify({ error: { reason: 'BACKUP', details: message } })}\n`);
    process.stderr.write(`stupa admin: ${message}\n`);
    process.exit(1);
  },
);
