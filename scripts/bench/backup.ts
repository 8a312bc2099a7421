// `npm run bench -- --backup [--files N]`: the local stack's backup and restore (stack/backup.ts,
// stack/restore.ts) at N files (100,000 by default): each store's time and bytes, the whole, the
// backup's size on disk, against a plain `cp -r` of the same data directory in the same run;
// then the restore into a new data directory, and a stack started on it answering for a sample.
//
// A stack of its own (stack.ts on free ports, a master key at DATA_DIR/master.key as `npm start`
// makes), filled as the service would have it without N uploads through HTTP:
// - Kubo: N distinct contents of 1-4 KiB, ADD_BATCH an add (CIDv1, raw leaves, as uploads; each
//   add also stores its directory block, as an upload's does). Pinned by the add, where other
//   benches add unpinned: the service's Kubo holds each Cluster pin as a recursive pin, and the
//   pins imported below would otherwise be `unexpectedly_unpinned`, which Cluster's recover
//   round (every 12 min) would start pinning all at once in the middle of the measure.
// - MongoDB: N file records of USERS users, straight through the files store's model (as
//   file-ids.ts and scale-load.ts seed), the `twins` index the API's start builds, and their
//   holds as the service keeps them (usage_holds and the usage counters: usage.ensure rebuilds
//   them from the records, as for a user counted before).
// - Cluster: N pins with the service's metadata (core/hold-sync.ts pinMetadata). The first
//   REST_PINS through Cluster's REST API, timed (384-737/s at 8 at a time on the 2-core machine:
//   100,000 would take 2-4 min, longer than the records and holds together). When the rest would take
//   over REST_BUDGET_S, the stack is stopped and the whole set written with
//   `ipfs-cluster-service state import --force`, each line the first REST pin's own JSON (GET
//   /allocations, what the backup copies) with its CID, metadata and time changed, and the stack
//   started again on the same directory.
// The backup is taken while the stack serves, with a light write load: LOADERS writers, each a
// file every LOAD_PAUSE_MS (Kubo add, record, Cluster pin). Backup and restore run as `npm run
// admin` runs them, stack/backup-cli.ts in a process of its own: called in this process instead,
// after its own reads of the 100,000 pins, the backup's copy of the pin set (fetch's body through
// Readable.fromWeb) took 49 s where curl takes 2-8 s. Everything started is stopped, and the
// directory removed, on every path (also Ctrl-C).
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pinMetadata } from '../../core/hold-sync.js';
import type { FileRecord } from '../../infra/db/files.js';
import { openDatabase } from '../../infra/db/index.js';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { randomBase62 } from '../../infra/secrets.js';
import { projectRoot } from '../../infra/paths.js';
import type { BackupManifest } from '../../stack/backup.js';
import { childEnv } from '../../stack/process.js';
import type { RestoreResult } from '../../stack/restore.js';
import { startStack, type Stack } from '../../stack/stack.js';
import {
  allocationLines,
  asService,
  contentOf,
  fileRecord,
  fillCluster,
  fillKubo,
  fillRecords,
  USERS,
  type Db,
  type Filled,
  type Say,
} from './backup-fill.js';

const run = promisify(execFile);

export const BACKUP_FILES = 100_000;
const SAMPLE = 100;
const LOADERS = 2;
const LOAD_PAUSE_MS = 200;

export type BackupBenchResult = Awaited<ReturnType<typeof benchBackup>>;

/** du of the paths together, a number a path (a hard link counted once over all of them). */
async function du(paths: string[], apparent: boolean): Promise<number[]> {
  const { stdout } = await run('du', ['-s', apparent ? '-b' : '-B1', ...paths]);
  return stdout
    .trim()
    .split('\n')
    .map((l) => Number(l.split('\t')[0]));
}

/** LOADERS writers, each adding a file as an upload would (Kubo add, record, Cluster pin), LOAD_PAUSE_MS apart. */
function startLoad(stack: Stack, db: Db, userId: string, seed: Buffer, signal: AbortSignal) {
  const kubo = createKubo(stack.endpoints.kuboApiUrl);
  const cluster = createClusterClient(stack.endpoints.clusterApiUrl);
  const acked: number[] = [];
  let failed = 0;
  let next = 0;
  let going = true;
  const loaders = Array.from({ length: LOADERS }, async () => {
    while (going && !signal.aborted) {
      const i = next++;
      try {
        const content = contentOf(seed, 0x8000_0000 + i);
        const cid = (await kubo.add(content, { cidVersion: 1, rawLeaves: true, pin: true, signal })).cid.toString();
        const id = `fil_${randomBase62(16)}`;
        await db.files.model.insertMany([fileRecord(userId, id, cid, content.length, Date.now(), i)]);
        await cluster.pin(cid, asService(pinMetadata({ account: userId, record: `file:${id}` })));
        acked.push(Date.now());
      } catch {
        if (going) failed++;
      }
      await new Promise((r) => setTimeout(r, LOAD_PAUSE_MS));
    }
  });
  return async () => {
    going = false;
    await Promise.all(loaders);
    return { acked, failed };
  };
}

/** `npm run admin -- backup|restore DIR --json` as the admin tool runs it: stack/backup-cli.ts in a
 * process of its own, on DATA_DIR and its master.key; its answer, and its wall time. */
async function stackCommand<T>(command: 'backup' | 'restore', dir: string, dataDir: string, signal: AbortSignal) {
  const t = Date.now();
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', path.join(projectRoot, 'stack', 'backup-cli.ts'), command, dir, '--json'],
    {
      cwd: projectRoot,
      env: childEnv(['MASTER_KEY', 'DATA_DIR'], { DATA_DIR: dataDir }),
      maxBuffer: 64 * 2 ** 20,
      signal,
    },
  );
  return { answer: JSON.parse(stdout) as T, seconds: (Date.now() - t) / 1000 };
}

async function writeMasterKey(dataDir: string, key: Buffer): Promise<void> {
  await fs.promises.mkdir(dataDir, { recursive: true });
  await fs.promises.writeFile(path.join(dataDir, 'master.key'), `${key.toString('hex')}\n`, { mode: 0o600 });
}

/** SAMPLE files spread over the N, read back from the restored stack: record, bytes, allocation. */
async function checkRestored(stack: Stack, f: Filled, seed: Buffer, manifest: BackupManifest) {
  const db = await openDatabase(stack.endpoints.mongodbUri);
  try {
    const kubo = createKubo(stack.endpoints.kuboApiUrl);
    const cluster = createClusterClient(stack.endpoints.clusterApiUrl);
    const checks = { records: 0, bytes: 0, allocations: 0, files: 0, pins: 0, restoreRecorded: false, kuboRepoSize: 0 };
    for (let k = 0; k < SAMPLE; k++) {
      const i = Math.floor((k * f.cids.length) / SAMPLE);
      const cid = f.cids[i]!;
      if ((await db.files.model.findById(f.fileIds[i]).lean<FileRecord>().exec())?.cid === cid) checks.records++;
      const chunks: Uint8Array[] = [];
      for await (const chunk of kubo.cat(cid, { signal: AbortSignal.timeout(10_000) })) chunks.push(chunk);
      if (Buffer.concat(chunks).equals(contentOf(seed, i))) checks.bytes++;
      if ((await cluster.allocation(cid))?.metadata?.record === `file:${f.fileIds[i]}`) checks.allocations++;
    }
    checks.files = await db.files.model.estimatedDocumentCount().exec();
    checks.pins = (await allocationLines(stack.endpoints.clusterApiUrl)).length;
    checks.restoreRecorded = (await db.restores.model.exists({ takenAt: new Date(manifest.takenAt).getTime() })) !== null;
    // What the restored Kubo believes its repository weighs (flatfs's disk usage), beside the blocks it was given.
    checks.kuboRepoSize = Number((await kubo.repo.stat()).repoSize);
    return checks;
  } finally {
    await db.close();
  }
}

type Load = { acked: number; failed: number; beforeSnapshot: number };

/** Wrong, not slow: what the restore lost or changed, a backup without the writes acknowledged before it. */
function brokenChecks(files: number, manifest: BackupManifest, load: Load, c: Awaited<ReturnType<typeof checkRestored>>): string[] {
  const inBackup = manifest.counts.files ?? 0;
  const pins = manifest.stores.cluster.pins;
  return [
    ...(c.records < SAMPLE ? [`${SAMPLE - c.records} sampled records missing or changed after the restore`] : []),
    ...(c.bytes < SAMPLE ? [`${SAMPLE - c.bytes} sampled contents did not read back with the same bytes`] : []),
    ...(c.allocations < SAMPLE ? [`${SAMPLE - c.allocations} sampled Cluster allocations missing`] : []),
    ...(inBackup < files + load.beforeSnapshot || inBackup > files + load.acked
      ? [`the backup holds ${inBackup} files: ${files} + ${load.beforeSnapshot} acknowledged before it, at most ${load.acked} more`]
      : []),
    ...(c.files !== inBackup ? [`the restored database holds ${c.files} files, the backup ${inBackup}`] : []),
    ...(c.pins !== pins ? [`the restored Cluster holds ${c.pins} pins, the backup ${pins}`] : []),
    ...(c.restoreRecorded ? [] : ['the restore was not recorded in the database']),
    ...(load.failed > 0 ? [`${load.failed} writes failed during the backup`] : []),
  ];
}

export async function benchBackup(files: number, say: Say) {
  const root = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'stupa-bench-backup-'));
  const data = path.join(root, 'data');
  const backup = path.join(root, 'backup');
  const copyDir = path.join(root, 'copy');
  const restoredDir = path.join(root, 'restored');
  const abort = new AbortController();
  const stacks: Promise<Stack>[] = [];
  const dbs = new Set<Db>();
  let stopLoad: (() => Promise<{ acked: number[]; failed: number }>) | undefined;
  const start = (dataDir: string) => {
    stacks.push(startStack({ dataDir, ports: 'free', ui: false, signal: abort.signal }));
    return stacks.at(-1)!;
  };
  const open = async (stack: Stack) => {
    const db = await openDatabase(stack.endpoints.mongodbUri);
    dbs.add(db);
    return db;
  };
  const close = async (db: Db) => void (dbs.delete(db) && (await db.close().catch(() => undefined)));
  let cleaning: Promise<void> | undefined;
  // A stack's stop() is once however often called: each is stopped here again, whatever came before.
  const cleanup = () =>
    (cleaning ??= (async () => {
      await stopLoad?.().catch(() => undefined);
      for (const db of [...dbs]) await close(db);
      for (const s of stacks) await (await s.catch(() => undefined))?.stop();
      fs.rmSync(root, { recursive: true, force: true });
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    say(`${signal}: stopping`);
    abort.abort(); // a stack still starting stops what it started and rejects
    void cleanup().finally(() => process.exit(128 + (os.constants.signals[signal] ?? 1)));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const seed = crypto.randomBytes(16);
    const masterKey = crypto.randomBytes(32);
    await writeMasterKey(data, masterKey);
    let stack = await start(data);
    say(`stack up (${data}); filling it with ${files} files`);
    let t = Date.now();
    const kubo = await fillKubo(stack, files, seed, say);
    const kuboSeconds = (Date.now() - t) / 1000;
    say(`kubo: ${files} files (${kubo.contentBytes} bytes) added and pinned in ${kuboSeconds.toFixed(1)} s`);
    let db = await open(stack);
    t = Date.now();
    const filled: Filled = { ...kubo, ...(await fillRecords(db, kubo, seed)) };
    const recordsSeconds = (Date.now() - t) / 1000;
    t = Date.now();
    for (const userId of filled.users) await db.usage.ensure(userId);
    const holdsSeconds = (Date.now() - t) / 1000;
    await close(db);
    say(`records: ${files} files of ${USERS} users in ${recordsSeconds.toFixed(1)} s, their holds in ${holdsSeconds.toFixed(1)} s`);
    t = Date.now();
    const { stack: restarted, ...pinned } = await fillCluster(data, stack, filled, say, () => start(data));
    stack = restarted;
    const pins = (await allocationLines(stack.endpoints.clusterApiUrl)).length;
    if (pins !== files) throw new Error(`Cluster holds ${pins} pins, not ${files}`);
    const clusterSeconds = (Date.now() - t) / 1000;
    say(
      `cluster: ${files} pins ${pinned.imported ? 'imported with state import' : 'through the REST API'} in ${clusterSeconds.toFixed(1)} s`,
    );
    const fill = { kubo: kuboSeconds, records: recordsSeconds, holds: holdsSeconds, cluster: clusterSeconds, ...pinned };

    // The backup, while the writers go on, through it and a little after.
    const [dataApparent] = await du([data], true);
    const [dataAllocated] = await du([data], false);
    db = await open(stack);
    stopLoad = startLoad(stack, db, filled.users[0]!, seed, abort.signal);
    await new Promise((r) => setTimeout(r, 1000));
    const { answer: manifest, seconds: backupSeconds } = await stackCommand<BackupManifest>('backup', backup, data, abort.signal);
    const st = manifest.stores;
    say(`backup: database ${st.mongodb.ms} ms, temporal ${st.temporal.ms} ms, cluster ${st.cluster.ms} ms, blocks ${st.blocks.ms} ms`);
    await new Promise((r) => setTimeout(r, 1000));
    const written = await stopLoad();
    stopLoad = undefined;
    await close(db);
    const takenAt = new Date(manifest.takenAt).getTime();
    const load: Load = {
      acked: written.acked.length,
      failed: written.failed,
      beforeSnapshot: written.acked.filter((at) => at < takenAt).length,
    };
    say(`backup: ${backupSeconds.toFixed(1)} s; ${load.acked} writes acknowledged around it, ${load.failed} failed`);
    const [apparent] = await du([backup], true);
    const [allocated] = await du([backup], false);
    const [, added] = await du([data, backup], false);

    // The raw component: a plain copy of the same data directory (the stack up, no writes).
    t = Date.now();
    await run('cp', ['-r', data, copyDir]);
    const copy = { seconds: (Date.now() - t) / 1000, allocated: (await du([copyDir], false))[0]! };
    fs.rmSync(copyDir, { recursive: true, force: true });
    say(`cp -r of the data directory: ${copy.seconds.toFixed(1)} s`);

    await stack.stop();
    await writeMasterKey(restoredDir, masterKey);
    const { answer: restored, seconds: restoreSeconds } = await stackCommand<RestoreResult>('restore', backup, restoredDir, abort.signal);
    t = Date.now();
    stack = await start(restoredDir);
    const startSeconds = (Date.now() - t) / 1000;
    say(`restore: ${restoreSeconds.toFixed(1)} s; the restored stack started in ${startSeconds.toFixed(1)} s`);
    const checks = await checkRestored(stack, filled, seed, manifest);
    await stack.stop();
    return {
      files,
      contentBytes: filled.contentBytes,
      fill,
      manifest,
      backupSeconds,
      /** du of the backup (apparent, allocated bytes), and what it adds beside the data directory (links counted once). */
      du: { apparent: apparent!, allocated: allocated!, added: added! },
      data: { apparent: dataApparent!, allocated: dataAllocated! },
      copy,
      load,
      restore: { ...restored, seconds: restoreSeconds, startSeconds },
      checks,
      broken: brokenChecks(files, manifest, load, checks),
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** The table: each store, the whole, against `cp -r`, the restore and its checks (MB = 2^20 bytes). */
export function backupLines(r: BackupBenchResult): string[] {
  const s = r.manifest.stores;
  const total = s.mongodb.bytes + s.temporal.bytes + s.cluster.bytes + s.blocks.bytes;
  const backupMBps = total / 2 ** 20 / r.backupSeconds;
  const copyMBps = r.data.apparent / 2 ** 20 / r.copy.seconds;
  const { fill: f, checks: c } = r;
  const row = (store: string, what: string, ms: number, bytes: number) =>
    `bench: backup ${store.padEnd(9)} ${what.padEnd(36)} ${String(ms).padStart(7)} ms ${mb(bytes).padStart(9)} MB`;
  const count = (n: number | undefined) => (n ?? 0).toLocaleString('en');
  const copied = s.blocks.blocks - s.blocks.linked;
  const blocks = `${count(s.blocks.blocks)} blocks, ${copied === 0 ? 'all linked' : `${count(copied)} copied`}`;
  const storesMs = s.mongodb.ms + s.temporal.ms + s.cluster.ms + s.blocks.ms;
  const rm = r.restore.ms;
  return [
    `bench: backup     ${count(r.files)} files of ${USERS} users, ${mb(r.contentBytes)} MB of content (1-4 KiB each); data directory ` +
      `${mb(r.data.apparent)} MB (${mb(r.data.allocated)} MB on disk); made in: Kubo ${f.kubo.toFixed(1)} s, records ${f.records.toFixed(1)} s, ` +
      `holds ${f.holds.toFixed(1)} s, Cluster ${f.cluster.toFixed(1)} s (${f.imported ? 'state import' : 'REST'}; REST ${f.restPerSecond.toFixed(1)} pins/s)`,
    row('database', `${s.mongodb.files.length} file(s), ${count(r.manifest.counts.files)} file records`, s.mongodb.ms, s.mongodb.bytes),
    row('temporal', '', s.temporal.ms, s.temporal.bytes),
    row('cluster', `${count(s.cluster.pins)} pins`, s.cluster.ms, s.cluster.bytes),
    row('blocks', blocks, s.blocks.ms, s.blocks.bytes),
    row('whole', `the command's wall; stores ${storesMs} ms`, Math.round(r.backupSeconds * 1000), total),
    `bench: backup on disk  du ${mb(r.du.apparent)} MB apparent, ${mb(r.du.allocated)} MB allocated; beside the data directory it adds ` +
      `${mb(r.du.added)} MB (hard links counted once)  [${r.load.acked} writes acknowledged around it, ${r.load.beforeSnapshot} before its ` +
      `snapshot; ${r.load.failed} failed]`,
    `bench: backup vs cp -r  backup ${backupMBps.toFixed(1)} MB/s (${mb(total)} MB in ${r.backupSeconds.toFixed(1)} s)  cp -r ` +
      `${copyMBps.toFixed(1)} MB/s (${mb(r.data.apparent)} MB in ${r.copy.seconds.toFixed(1)} s, ${mb(r.copy.allocated)} MB on disk)  ` +
      `ratio ${(backupMBps / copyMBps).toFixed(2)}; wall ${(r.backupSeconds / r.copy.seconds).toFixed(2)}× cp's`,
    `bench: restore    ${r.restore.seconds.toFixed(1)} s: database ${rm.mongodb} ms, temporal ${rm.temporal} ms, blocks ${rm.blocks} ms, ` +
      `cluster ${rm.cluster} ms, record ${rm.record} ms; the restored stack started in ${r.restore.startSeconds.toFixed(1)} s`,
    `bench: restore checks  ${SAMPLE} sampled: records ${c.records}, same bytes from Kubo ${c.bytes}, Cluster allocations ${c.allocations}; ` +
      `files ${count(c.files)} (backup ${count(r.manifest.counts.files)}), pins ${count(c.pins)} (backup ${count(s.cluster.pins)}), ` +
      `restore recorded: ${c.restoreRecorded}; Kubo's repo size ${mb(c.kuboRepoSize)} MB for ${mb(s.blocks.bytes)} MB of blocks`,
  ];
}
