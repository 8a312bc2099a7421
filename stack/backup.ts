// An online backup of the local stack (`npm run admin -- backup DIR`), taken while it serves.
// The stores are copied in an order that makes the copy whole: the database first, then
// Temporal, then Cluster's pin set, then Kubo's blocks. A record in the database copy was
// written before its snapshot, so its pin (made before it is acknowledged) is in the later
// pin-set copy, and the blocks of every pin in that copy are in the still later blocks copy.
// The reverse is allowed: content pinned between the database snapshot and the pin-set copy
// is pinned with no record after a restore, and the audit keeps it (docs/operations/audit.md).
//
// Never in a backup: the master key. With it, the database copy exposes every IPNS private key.
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import pLimit from 'p-limit';
import { gitCommit } from '../infra/build-id.js';
import { projectRoot } from '../infra/paths.js';
import { readStackFile, stackFilePath } from './stack-file.js';
import { writeFileAtomic } from './process.js';

const run = promisify(execFile);

export const MANIFEST = 'manifest.json';
export const BACKUP_FORMAT = 1;
const BLOCK_COPY_CONCURRENCY = 64;

/** Where each store lives in a backup directory, and where in a data directory. */
export const LAYOUT = {
  /** FerretDB's SQLite backend: one file per database. */
  mongodb: { backup: 'mongodb', data: path.join('ferretdb', 'sqlite') },
  /** The Temporal dev server's SQLite database. */
  temporal: { backup: 'temporal.db', data: path.join('temporal', 'temporal.db') },
  /** Cluster's pin set, one JSON pin a line: what `ipfs-cluster-service state import` reads. */
  cluster: { backup: 'cluster-pinset.ndjson', data: 'cluster' },
  /** Kubo's blockstore (flatfs), merged from every node of the stack. */
  blocks: { backup: 'kubo-blocks', data: path.join('kubo', 'blocks') },
} as const;

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  /** Before the database snapshot began: everything acknowledged before this is in the backup. */
  takenAt: string;
  finishedAt: string;
  stupa: { version: string; commit?: string };
  /** The stack's components (stack/versions.json) that wrote the stores. */
  components: Record<string, string>;
  /** The database the service uses (the path of its MongoDB URI). */
  database: string;
  /** SHA-256 of the master key, first 16 hex digits: restore checks the key it is given. */
  masterKeySha256: string;
  stores: {
    mongodb: { files: string[]; bytes: number; ms: number };
    temporal: { bytes: number; ms: number };
    cluster: { pins: number; bytes: number; ms: number };
    blocks: { blocks: number; bytes: number; linked: number; ms: number };
  };
  /** Records by collection, at the snapshot (read from the copy, not the live database). */
  counts: Record<string, number>;
  /** The service's settings from the environment the backup ran in, secrets left out. */
  config: Record<string, string>;
}

export class BackupError extends Error {}

/** SQLite's own online copy: VACUUM INTO reads the database in one read transaction, so the copy is
 * one consistent moment; in WAL mode (FerretDB's and the stack's Temporal) it does not hold up
 * writers. Chosen over `.backup`, whose page steps restart whenever a writer changes the source. */
export async function sqliteSnapshot(source: string, target: string): Promise<void> {
  const quoted = target.replaceAll("'", "''");
  await run('sqlite3', ['-cmd', '.timeout 30000', source, `VACUUM INTO '${quoted}'`]).catch(
    (err: NodeJS.ErrnoException & { stderr?: string }) => {
      if (err.code === 'ENOENT')
        throw new BackupError("sqlite3 is not installed (Debian: apt-get install sqlite3); backup and restore use SQLite's own copy");
      throw new BackupError(`sqlite3 could not copy ${source}: ${err.stderr?.trim() || err.message}`);
    },
  );
}

/** Rows of each FerretDB collection, from a copy (SQLite counts a table's rows without decoding them). */
async function collectionCounts(file: string): Promise<Record<string, number>> {
  const { stdout } = await run('sqlite3', ['-json', file, 'SELECT name, table_name FROM _ferretdb_collections']);
  const counts: Record<string, number> = {};
  for (const { name, table_name } of JSON.parse(stdout || '[]') as { name: string; table_name: string }[]) {
    const { stdout: n } = await run('sqlite3', [file, `SELECT count(*) FROM "${table_name.replaceAll('"', '""')}"`]);
    counts[name] = Number(n.trim());
  }
  return counts;
}

/** Links each block file into `target` when both are on one file system (a block file is never
 * rewritten in place: flatfs writes a new file and renames it, and removes it on GC, which leaves
 * the link), else copies it. A shard directory at a time, BLOCK_COPY_CONCURRENCY files at once
 * (one after another, 200,000 blocks took 39-46 s; 64 at once, 7-12 s; measured by the bench),
 * so memory stays flat. */
export async function copyBlocks(source: string, target: string): Promise<{ blocks: number; bytes: number; linked: number }> {
  const totals = { blocks: 0, bytes: 0, linked: 0 };
  const limit = pLimit(BLOCK_COPY_CONCURRENCY);
  fs.mkdirSync(target, { recursive: true });
  const copyOne = async (src: string, dest: string) => {
    const size = await fs.promises.stat(src).then(
      (s) => s.size,
      () => -1,
    );
    if (size < 0) return; // removed since listed (GC): not in any pin copied before
    try {
      try {
        await fs.promises.link(src, dest);
        totals.linked++;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EXDEV' && code !== 'EPERM') throw err;
        await fs.promises.copyFile(src, dest, fs.constants.COPYFILE_EXCL);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return; // the same block from another node
      throw err;
    }
    totals.blocks++;
    totals.bytes += size;
  };
  for await (const shard of await fs.promises.opendir(source)) {
    if (!shard.isDirectory()) continue;
    const from = path.join(source, shard.name);
    const to = path.join(target, shard.name);
    fs.mkdirSync(to, { recursive: true });
    const copies: Promise<void>[] = [];
    for await (const entry of await fs.promises.opendir(from)) {
      // flatfs's temporary files end otherwise
      if (entry.name.endsWith('.data')) copies.push(limit(() => copyOne(path.join(from, entry.name), path.join(to, entry.name))));
    }
    await Promise.all(copies);
  }
  return totals;
}

/** Streams Cluster's pin set into `file`, counting its lines. With Node's own http rather than
 * fetch: the bench measured fetch at 28-49 s for 100,000 pins where http took 2-7 s, and only
 * http reads the X-Stream-Error trailer, which Cluster sets when a stream fails partway. */
async function copyPinSet(clusterApiUrl: string, file: string): Promise<number> {
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http.get(`${clusterApiUrl}/allocations?filter=pin`, resolve).on('error', reject);
  });
  if (res.statusCode !== 200) {
    res.resume();
    throw new BackupError(`Cluster answered ${res.statusCode} to GET /allocations`);
  }
  let lines = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
      done(null, chunk);
    },
  });
  await pipeline(res, count, fs.createWriteStream(file));
  const streamError = res.trailers['x-stream-error'];
  if (streamError) throw new BackupError(`Cluster's pin set stream failed partway: ${streamError}`);
  return lines;
}

const SECRET = /KEY|SECRET|PASSWORD|TOKEN|CREDENTIAL/i;
const SETTING = /^(STACK_|CLUSTER_|PIN_|IPNS_|GATEWAY_|S3_|PLANS_|UPLOAD_|TEMPORAL_|LOG_|RATE_|WEBHOOK_|IMAGE_|AUDIT_|SWEEP_)/;

function settings(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && SETTING.test(name) && !SECRET.test(name)) out[name] = value;
  return out;
}

export function masterKeyDigest(key: Buffer): string {
  return crypto.createHash('sha256').update(key).digest('hex').slice(0, 16);
}

function fileSize(file: string): number {
  return fs.statSync(file).size;
}

export interface BackupOptions {
  dataDir: string;
  target: string;
  masterKey: Buffer;
  env?: NodeJS.ProcessEnv;
  say?: (line: string) => void;
}

/** Backs up the running local stack of `dataDir` into `target` (a new or empty directory). The
 * manifest is written last: a directory without one is not a backup. */
export async function backupStack(options: BackupOptions): Promise<BackupManifest> {
  const dataDir = path.resolve(options.dataDir);
  const target = path.resolve(options.target);
  const say = options.say ?? (() => undefined);
  const stack = readStackFile(dataDir);
  const endpoints = stack.endpoints as { mongodbUri?: string; clusterApiUrl?: string } | undefined;
  if (!stack.pids || !endpoints?.clusterApiUrl)
    throw new BackupError(`no local stack runs on ${dataDir} (${stackFilePath(dataDir)}): start it with npm start`);
  if (!stack.pids.ferretdb)
    throw new BackupError(
      'the stack uses a MongoDB of its own (MONGODB_URI): back that up with its own tools (mongodump); see docs/operations/upgrades-and-backups.md',
    );
  if (!stack.pids.temporal)
    throw new BackupError(
      'the stack runs Temporal in production shape (PostgreSQL): back it up with pg_dump; see docs/operations/upgrades-and-backups.md',
    );
  if (fs.existsSync(target) && fs.readdirSync(target).length > 0)
    throw new BackupError(`${target} is not empty: back up into a new directory`);
  fs.mkdirSync(target, { recursive: true });
  const database = new URL(endpoints.mongodbUri ?? 'mongodb://x/stupa').pathname.replace(/^\//, '') || 'test';

  const takenAt = new Date();
  let t = Date.now();
  const mongoDir = path.join(target, LAYOUT.mongodb.backup);
  fs.mkdirSync(mongoDir);
  const files = fs.readdirSync(path.join(dataDir, LAYOUT.mongodb.data)).filter((f) => f.endsWith('.sqlite'));
  for (const file of files) await sqliteSnapshot(path.join(dataDir, LAYOUT.mongodb.data, file), path.join(mongoDir, file));
  const mongodb = { files, bytes: files.reduce((sum, f) => sum + fileSize(path.join(mongoDir, f)), 0), ms: Date.now() - t };
  say(`database: ${files.length} file(s), ${mongodb.bytes} bytes in ${mongodb.ms} ms`);

  t = Date.now();
  await sqliteSnapshot(path.join(dataDir, LAYOUT.temporal.data), path.join(target, LAYOUT.temporal.backup));
  const temporal = { bytes: fileSize(path.join(target, LAYOUT.temporal.backup)), ms: Date.now() - t };
  say(`temporal: ${temporal.bytes} bytes in ${temporal.ms} ms`);

  t = Date.now();
  const pinsFile = path.join(target, LAYOUT.cluster.backup);
  const pins = await copyPinSet(endpoints.clusterApiUrl, pinsFile);
  const cluster = { pins, bytes: fileSize(pinsFile), ms: Date.now() - t };
  say(`cluster: ${pins} pins in ${cluster.ms} ms`);

  t = Date.now();
  const blocksTarget = path.join(target, LAYOUT.blocks.backup);
  const nodes = fs.readdirSync(dataDir).filter((d) => /^kubo(-\d+)?$/.test(d) && fs.existsSync(path.join(dataDir, d, 'blocks')));
  const blocks = { blocks: 0, bytes: 0, linked: 0, ms: 0 };
  for (const node of nodes) {
    const copied = await copyBlocks(path.join(dataDir, node, 'blocks'), blocksTarget);
    blocks.blocks += copied.blocks;
    blocks.bytes += copied.bytes;
    blocks.linked += copied.linked;
  }
  blocks.ms = Date.now() - t;
  say(`blocks: ${blocks.blocks} (${blocks.bytes} bytes, ${blocks.linked} linked) in ${blocks.ms} ms`);

  const versions = JSON.parse(fs.readFileSync(path.join(projectRoot, 'stack', 'versions.json'), 'utf8')) as {
    components: Record<string, { version: string }>;
  };
  const pkg = JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string };
  const main = files.includes(`${database}.sqlite`) ? path.join(mongoDir, `${database}.sqlite`) : undefined;
  const commit = gitCommit();
  const manifest: BackupManifest = {
    format: BACKUP_FORMAT,
    takenAt: takenAt.toISOString(),
    finishedAt: new Date().toISOString(),
    stupa: { version: pkg.version, ...(commit ? { commit } : {}) },
    components: Object.fromEntries(Object.entries(versions.components).map(([name, c]) => [name, c.version])),
    database,
    masterKeySha256: masterKeyDigest(options.masterKey),
    stores: { mongodb, temporal, cluster, blocks },
    counts: main ? await collectionCounts(main) : {},
    config: settings(options.env ?? process.env),
  };
  writeFileAtomic(path.join(target, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

export function readManifest(dir: string): BackupManifest {
  const file = path.join(dir, MANIFEST);
  if (!fs.existsSync(file)) throw new BackupError(`${dir} has no ${MANIFEST}: not a backup, or one that did not finish`);
  const manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as BackupManifest;
  if (manifest.format !== BACKUP_FORMAT)
    throw new BackupError(`${file}: backup format ${manifest.format}, this version reads ${BACKUP_FORMAT}`);
  return manifest;
}
