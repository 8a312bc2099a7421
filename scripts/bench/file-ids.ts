// `npm run bench -- --migrate [--records N]`: migration 1 (infra/db/migrations/0001-file-ids.ts)
// as an upgrade runs it now, in the background of an API process while the API serves. N files
// from before file ids (keyed `<userId>:<multihash>`, 1,000 users) are written straight into
// the stack's database, as the version before wrote them, and the database is made to look
// un-migrated. Then, in order:
//   1. the API's latency at idle: a steady load as the bench user (a file listing and a small
//      upload, CONCURRENCY in flight) for IDLE_SECONDS;
//   2. what a legacy user's first request waits for while the migration is still running:
//      the gate moving that one user's records, alone on the machine;
//   3. the migration itself, run here as another API process would run it (the bench's API
//      ran its own at its start, on an empty database, and is done), with the same load
//      running the whole time: its time and rate, and the load's latency during it.
// The bench user has no old records, so its requests pass the gate at once: what the load
// measures is what the migration's writes cost everyone else sharing the database.
import crypto from 'node:crypto';
import os from 'node:os';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { create as digestOf } from 'multiformats/hashes/digest';
import { parseCid } from '../../infra/ipfs/cid.js';
import { userContentKey } from '../../infra/db/by-id.js';
import { TWIN_INDEX_NAME, type FileRecord } from '../../infra/db/files.js';
import { openDatabase } from '../../infra/db/index.js';
import { FIRST_FORM_DONE, fileIds, fileIdsGate, migratedFileId } from '../../infra/db/migrations/0001-file-ids.js';
import { migrationKey } from '../../infra/db/migrations/migration.js';
import { runMigrations } from '../../infra/db/migrations/runner.js';
import { createLogger } from '../../infra/logger.js';
import { readStackFile } from '../../stack/stack-file.js';
import { ms, percentile, untilIdle, type Figure } from './bounded.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { apiCall, type BenchContext } from './harness.js';

export const MIGRATE_RECORDS = 1_000_000;
const USERS = 1000;
const BATCH = 1000;
/** Requests of the load in flight at once, from the bench's first request to its last. */
const CONCURRENCY = 4;
const IDLE_SECONDS = 15;
/** Load thrown away before the idle figure: JIT, connection pools, the bench user's first gate.
 * At 3 s the API still used 1.8x the CPU per request it used later, and idle looked slower. */
const WARM_SECONDS = 15;

/** The i-th legacy file record: a distinct raw CID (sha-256 of the counter), 1,000 users. */
function legacyRecord(i: number, now: number): FileRecord {
  const digest = crypto.createHash('sha256').update(`migrate ${i}`).digest();
  const cid = parseCid(CID.create(1, raw.code, digestOf(0x12, digest)).toString());
  const userId = `usr_bench${String(i % USERS).padStart(11, '0')}`;
  return {
    _id: userContentKey(userId, cid.multihash),
    userId,
    cid: cid.v1,
    multihash: cid.multihash,
    name: `file-${i}.txt`,
    description: null,
    size: 1024,
    dagSize: 1024,
    mimeType: 'text/plain',
    folderId: i % 3 === 0 ? null : `fld_bench${String(i % 7).padStart(11, '0')}`,
    metadata: {},
    createdAt: now + i,
    updatedAt: now + i,
  };
}

type Route = 'list' | 'upload';

interface LoadResult {
  /** Milliseconds of every request, answered or not, by route and all together. */
  ms: Record<Route | 'all', number[]>;
  /** Requests not answered 2xx (or not at all), and the first one's error. */
  bad: number;
  firstBad?: string;
  seconds: number;
}

/**
 * Keeps CONCURRENCY requests in flight as the bench user until stopped, alternating a listing
 * of 50 files and a small JSON upload (both read the user's files, and so pass the gate; the
 * upload writes one too). Each client sends its next request as soon as the last is answered.
 */
function startLoad(ctx: BenchContext, tag: string): { stop(): Promise<LoadResult> } {
  const result: LoadResult = { ms: { list: [], upload: [], all: [] }, bad: 0, seconds: 0 };
  const seed = crypto.randomBytes(4).toString('hex');
  const start = performance.now();
  let stopping = false;
  let sent = 0;
  const client = async () => {
    while (!stopping) {
      const i = sent++;
      const route: Route = i % 2 === 0 ? 'list' : 'upload';
      const t = performance.now();
      try {
        if (route === 'list') await apiCall(ctx, 'GET', '/upload/list?limit=50');
        else await apiCall(ctx, 'POST', '/upload/new', { content: { bench: 'migrate', tag, seed, i }, name: `load-${tag}-${i}.json` });
      } catch (err) {
        ctx.signal.throwIfAborted();
        result.bad++;
        result.firstBad ??= (err as Error).message.slice(0, 300);
      }
      const took = performance.now() - t;
      result.ms[route].push(took);
      result.ms.all.push(took);
    }
  };
  const clients = Array.from({ length: CONCURRENCY }, client);
  return {
    async stop() {
      stopping = true;
      await Promise.all(clients);
      result.seconds = (performance.now() - start) / 1000;
      return result;
    },
  };
}

const sleep = (seconds: number) => new Promise((r) => setTimeout(r, seconds * 1000));
const figure = (samples: number[]): Figure => ({ samples, timeouts: 0, timeoutMs: 0 });
const at = (samples: number[], q: number) => percentile(figure(samples), q).ms;
const n = (v: number) => v.toLocaleString('en');
const perSecond = (r: LoadResult) => (r.ms.all.length / r.seconds).toFixed(1);

/** CPU cores each process used between two readings of `cpuTimes`. */
function cores(before: Record<string, number>, after: Record<string, number>, seconds: number): string {
  return Object.keys(after)
    .map((k) => `${k} ${((after[k]! - before[k]!) / TICKS_PER_SECOND / seconds).toFixed(2)}`)
    .join(', ');
}

export async function benchFileIds(ctx: BenchContext, say: (line: string) => void, records = MIGRATE_RECORDS): Promise<number> {
  const key = migrationKey(fileIds);
  const ferretdb = readStackFile(ctx.dataDir).pids?.ferretdb;
  const pids: Record<string, number> = {
    ferretdb: ferretdb ?? 0,
    api: ctx.api.pid ?? 0,
    worker: ctx.worker.pid ?? 0,
    bench: process.pid,
  };
  const cpuTimes = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuTicks(pid) : 0]));
  const busyPids = Object.values(pids).filter((p) => p > 0 && p !== process.pid);
  const db = await openDatabase(ctx.endpoints.mongodbUri);
  try {
    const now = Date.now();
    let t = Date.now();
    for (let i = 0; i < records; i += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, records - i) }, (_, k) => legacyRecord(i + k, now));
      await db.files.model.insertMany(batch, { ordered: false });
      if ((i + BATCH) % 100_000 === 0) say(`migrate: ${n(i + BATCH)} legacy records written`);
    }
    const writeSeconds = (Date.now() - t) / 1000;
    // The API migrated its empty database at its start; an upgraded database is not migrated
    // yet. The twins index stays: expand builds it before serving, and legacy records satisfy it.
    await db.migrations.model.deleteOne({ _id: key }).exec();
    await db.counters.model.deleteOne({ _id: FIRST_FORM_DONE }).exec();
    await untilIdle(busyPids, 60_000);

    // 1. Latency at idle.
    const warm = startLoad(ctx, 'warm');
    await sleep(WARM_SECONDS);
    await warm.stop();
    let cpu = cpuTimes();
    const idleLoad = startLoad(ctx, 'idle');
    await sleep(IDLE_SECONDS);
    const idle = await idleLoad.stop();
    const idleCores = cores(cpu, cpuTimes(), idle.seconds);
    say(`migrate: idle load ${n(idle.ms.all.length)} requests, p50 ${ms(percentile(figure(idle.ms.all), 0.5))}`);

    // 2. The gate for one legacy user, on a handle of its own (as another API process's).
    await untilIdle(busyPids, 60_000);
    const gatedUser = legacyRecord(0, now).userId;
    const gatedRecords = await db.files.model.countDocuments({ userId: gatedUser }).exec();
    const gateDb = await openDatabase(ctx.endpoints.mongodbUri);
    let gateMs: number;
    try {
      const gate = fileIdsGate({ files: gateDb.files, connection: gateDb.connection, migrations: gateDb.migrations });
      t = performance.now();
      await gate(gatedUser);
      gateMs = performance.now() - t;
    } finally {
      await gateDb.close();
    }
    const gatedLeft = await db.files.model.countDocuments({ userId: gatedUser, _id: { $not: /^fil_/ } }).exec();
    say(`migrate: the gate moved ${n(gatedRecords)} records of ${gatedUser} in ${gateMs.toFixed(0)} ms (${gatedLeft} left)`);
    await untilIdle(busyPids, 60_000);

    // 3. The migration, with the load running the whole time.
    let peakRss = process.memoryUsage().rss;
    const rss = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);
    const migrationStart = Date.now();
    const progress = setInterval(() => {
      void db.migrations.get(key).then((r) => {
        const seconds = (Date.now() - migrationStart) / 1000;
        if (r) say(`migrate: ${n(r.changed)} migrated, ${seconds.toFixed(0)} s (${n(Math.round(r.changed / seconds))}/s)`);
      });
    }, 15_000);
    cpu = cpuTimes();
    const duringLoad = startLoad(ctx, 'during');
    let runs: Awaited<ReturnType<typeof runMigrations>>;
    try {
      const logger = createLogger('warn', 'bench');
      runs = await runMigrations(db, { logger, by: 'bench', migrations: [fileIds], signal: ctx.signal });
    } finally {
      clearInterval(progress);
      clearInterval(rss);
    }
    const during = await duringLoad.stop();
    const duringCores = cores(cpu, cpuTimes(), during.seconds);
    const run = runs.find((r) => r.key === key);
    if (!run) throw new Error(`runMigrations did not run ${key} (${JSON.stringify(runs)})`);

    // Checks: every record migrated, none left, fields kept, the index there, the record done.
    const left = await db.files.model.countDocuments({ _id: { $not: /^fil_/ } }).exec();
    const benchFiles = await db.files.model.countDocuments({ userId: ctx.user.userId }).exec();
    const total = (await db.files.model.countDocuments({}).exec()) - benchFiles;
    const sample = Array.from({ length: 100 }, (_, k) => legacyRecord(Math.floor((k * records) / 100), now));
    const found = await db.files.model
      .find({ _id: { $in: sample.map((r) => migratedFileId(r._id)) } })
      .lean<FileRecord[]>()
      .exec();
    const intact = sample.every((r) => {
      const f = found.find((x) => x._id === migratedFileId(r._id));
      return f !== undefined && f.cid === r.cid && f.name === r.name && f.folderId === r.folderId && f.createdAt === r.createdAt;
    });
    const indexed = (await db.files.model.collection.indexes()).some((i) => i.name === TWIN_INDEX_NAME && i.unique);
    const record = await db.migrations.get(key);
    const recorded = run.done && record?.state === 'done' && record.changed === records - gatedRecords;
    const logLeft = await db.connection.collection('filemigrations').countDocuments({});
    const bad = idle.bad + during.bad;

    const seconds = run.ms / 1000;
    const rate = run.changed / seconds;
    const ratio = (q: number) => (at(during.ms.all, q) / at(idle.ms.all, q)).toFixed(2);
    const routes = (['list', 'upload'] as const)
      .map(
        (r) =>
          `${r} idle ${ms(percentile(figure(idle.ms[r]), 0.5))}/${ms(percentile(figure(idle.ms[r]), 0.99))}, ` +
          `during ${ms(percentile(figure(during.ms[r]), 0.5))}/${ms(percentile(figure(during.ms[r]), 0.99))}`,
      )
      .join('; ');
    process.stdout.write(
      `\nbench: migrate        ${n(run.changed)} files from before file ids in ${seconds.toFixed(1)} s ` +
        `(${n(Math.round(rate))}/s; ${(1_000_000 / rate / 60).toFixed(1)} min per million) in the background, ` +
        `${CONCURRENCY} requests in flight; peak RSS ${Math.round(peakRss / 2 ** 20)} MB; writing them took ${writeSeconds.toFixed(1)} s\n` +
        `bench: migrate latency idle p50 ${ms(percentile(figure(idle.ms.all), 0.5))} p99 ${ms(percentile(figure(idle.ms.all), 0.99))} ` +
        `(${n(idle.ms.all.length)} requests, ${perSecond(idle)}/s), during p50 ${ms(percentile(figure(during.ms.all), 0.5))} ` +
        `p99 ${ms(percentile(figure(during.ms.all), 0.99))} (${n(during.ms.all.length)} requests, ${perSecond(during)}/s); ` +
        `during/idle p50 ${ratio(0.5)}x p99 ${ratio(0.99)}x\n` +
        `bench: migrate by route p50/p99 ${routes}\n` +
        `bench: migrate cpu     cores used idle: ${idleCores}; during: ${duringCores}\n` +
        `bench: migrate gate    one user of ${n(gatedRecords)} records met mid-migration: ${gateMs.toFixed(0)} ms ` +
        `(its first request waits this long)\n` +
        `bench: migrate checks  left ${left}, total ${n(total)} of ${n(records)}, 100 sampled intact: ${intact}, ` +
        `twins index: ${indexed}, ${key} ${record?.state ?? 'missing'} changed ${n(record?.changed ?? 0)} ` +
        `(want ${n(records - gatedRecords)}), filemigrations left ${logLeft}, load not 2xx ${bad}` +
        `${(idle.firstBad ?? during.firstBad) ? ` (first: ${idle.firstBad ?? during.firstBad})` : ''}\n` +
        `bench: migrate machine ${os.cpus().length} cores, load average ${ctx.loadStart} at start, ` +
        `${os.loadavg()[0]!.toFixed(1)} at end (other processes share it)\n`,
    );
    const passed = left === 0 && total === records && intact && indexed && recorded && logLeft === 0 && bad === 0 && gatedLeft === 0;
    return passed ? 0 : 1;
  } finally {
    await db.close();
  }
}
