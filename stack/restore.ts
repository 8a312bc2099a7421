// `npm run admin -- restore DIR`: brings a backup (stack/backup.ts) back into an empty data
// directory, with the stack stopped. Then `npm start` on it, and the audit (printed next steps).
//
// In order: the master key is checked first (a restore with another key would start, and then
// fail every S3 request and IPNS publish); the stores are put where the stack keeps them; Kubo
// and Cluster get their repositories (`ipfs init`, `ipfs-cluster-service init`: a new identity,
// the pin set imported with `state import`); last, the restore is recorded in the database,
// with the backup's time, so the audit knows which pins no record holds because the backup
// predates them (core/restores.ts).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { openDatabase } from '../infra/db/index.js';
import { recordRestore } from '../core/restores.js';
import { binaryPath } from './binaries.js';
import { BackupError, copyBlocks, LAYOUT, masterKeyDigest, readManifest, type BackupManifest } from './backup.js';
import { clusterIdentity } from './cluster.js';
import { startFerretDb } from './ferretdb.js';
import { kuboPeerId } from './kubo.js';
import { freePort } from './ports.js';
import { childEnv } from './process.js';
import { alive, readStackFile } from './stack-file.js';

const run = promisify(execFile);

export interface RestoreOptions {
  source: string;
  dataDir: string;
  /** The master key the restored stack will run with (MASTER_KEY or DATA_DIR/master.key). */
  masterKey: Buffer | undefined;
  say?: (line: string) => void;
}

export interface RestoreResult {
  manifest: BackupManifest;
  /** Each step's time; blocks and cluster ran side by side. */
  ms: { mongodb: number; temporal: number; blocks: number; cluster: number; record: number };
}

/** A copy of SQLite's own format needs no tool to put back: the backup's file is a whole database. */
function copyFile(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL);
}

export async function restoreStack(options: RestoreOptions): Promise<RestoreResult> {
  const source = path.resolve(options.source);
  const dataDir = path.resolve(options.dataDir);
  const say = options.say ?? (() => undefined);
  const manifest = readManifest(source);

  const stack = readStackFile(dataDir);
  if (alive(stack.owner)) throw new BackupError(`a stack runs on ${dataDir} (pid ${stack.owner}): stop it first`);
  const taken = ['ferretdb', 'temporal', 'kubo', 'cluster'].filter((d) => fs.existsSync(path.join(dataDir, d)));
  if (taken.length > 0)
    throw new BackupError(`${dataDir} already holds ${taken.join(', ')}: restore into an empty data directory (move this one aside)`);
  if (!options.masterKey)
    throw new BackupError(
      `no master key: put the one the backup was taken with at ${path.join(dataDir, 'master.key')} or set MASTER_KEY (backups never hold it)`,
    );
  if (masterKeyDigest(options.masterKey) !== manifest.masterKeySha256)
    throw new BackupError(
      'the master key is not the one the backup was taken with: S3 signatures, IPNS keys and webhook secrets would not open',
    );

  const ms = { mongodb: 0, temporal: 0, blocks: 0, cluster: 0, record: 0 };
  let t = Date.now();
  for (const file of manifest.stores.mongodb.files)
    copyFile(path.join(source, LAYOUT.mongodb.backup, file), path.join(dataDir, LAYOUT.mongodb.data, file));
  ms.mongodb = Date.now() - t;
  t = Date.now();
  copyFile(path.join(source, LAYOUT.temporal.backup), path.join(dataDir, LAYOUT.temporal.data));
  ms.temporal = Date.now() - t;
  say(`database and temporal in place (${ms.mongodb + ms.temporal} ms)`);

  // The blocks and Cluster's pin set are independent: restored side by side.
  const blocksAndPins = Date.now();
  const restoreBlocks = async () => {
    const start = Date.now();
    await kuboPeerId(path.join(dataDir, 'kubo')); // ipfs init: a new identity, an empty blockstore
    const blocks = await copyBlocks(path.join(source, LAYOUT.blocks.backup), path.join(dataDir, LAYOUT.blocks.data));
    // init wrote the empty repository's size; without the file, Kubo counts the blocks at its
    // next start (a restored Kubo reported 0.4 MB for 255.6 MB of blocks, and Cluster's
    // free-space metric and Kubo's size limit read that number).
    fs.rmSync(path.join(dataDir, LAYOUT.blocks.data, 'diskUsage.cache'), { force: true });
    ms.blocks = Date.now() - start;
    say(`blocks: ${blocks.blocks} (${blocks.linked} linked) in ${ms.blocks} ms`);
  };
  const restorePins = async () => {
    const start = Date.now();
    const clusterDir = path.join(dataDir, LAYOUT.cluster.data);
    await clusterIdentity(clusterDir); // ipfs-cluster-service init
    await run(binaryPath('cluster', 'ipfs-cluster-service'), ['state', 'import', '--force', path.join(source, LAYOUT.cluster.backup)], {
      env: childEnv(['CLUSTER_', 'IPFS_CLUSTER_'], { IPFS_CLUSTER_PATH: clusterDir }),
      maxBuffer: 64 * 1024 * 1024,
    });
    ms.cluster = Date.now() - start;
    say(`cluster: ${manifest.stores.cluster.pins} pins imported in ${ms.cluster} ms`);
  };
  await Promise.all([restoreBlocks(), restorePins()]);
  say(`blocks and pins side by side: ${Date.now() - blocksAndPins} ms`);

  // The record of the restore goes through the database server itself, started here for it alone.
  t = Date.now();
  const logDir = path.join(dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const ferret = await startFerretDb({ dataDir: path.join(dataDir, 'ferretdb'), logDir, port: await freePort() });
  try {
    const uri = new URL(ferret.uri);
    uri.pathname = `/${manifest.database}`;
    const db = await openDatabase(uri.toString());
    try {
      await recordRestore(db, { takenAt: new Date(manifest.takenAt) });
    } finally {
      await db.close();
    }
  } finally {
    await ferret.stop();
  }
  ms.record = Date.now() - t;
  return { manifest, ms };
}
