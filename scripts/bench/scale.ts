// `npm run bench -- --scale`: the service at a million records (the issue "The default
// database at a million records"). On the bench's isolated stack:
//   1. on the empty database: POST /upload/new and POST /pin latency (HTTP), the unpin
//      decision (db.holds.of) and one sweep (resyncDifferences);
//   2. loads file records, pin requests and folders directly through the stores' mongoose
//      models (insertMany, in batches), one user holding half of each kind (records.ts);
//   3. on the loaded database: list pages of that user (first, 10,000 deep, by folder; pins
//      as a store query, as there is no pin list endpoint yet), the unpin decision, one
//      sweep, then upload and pin latency again, as ratios to the empty database's.
// Every figure is bounded: a measurement takes samples until it has enough or its time
// budget is spent, each sample gives up after a timeout (reported as such, and as "over"
// the timeout in the percentiles), and before each one the bench waits (bounded) until the
// database server is idle, so a timed-out request still running there does not weigh on
// the next figure. The load itself stops at --load-minutes with what it has.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createActivities } from '../../activities/index.js';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { loadConfig } from '../../infra/config.js';
import { parseCid } from '../../infra/ipfs/cid.js';
import { openDatabase } from '../../infra/db/index.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { createLogger } from '../../infra/logger.js';
import { BENCH_PLAN } from './children.js';
import { say, type BenchContext } from './harness.js';
import { usageAtScale } from './scale-usage.js';
import { describe, diskUsage, measure, percentile, ratio, untilIdle, usable, verdict, type Figure, type Bounds } from './bounded.js';
import { BATCH, load, LOAD_CONCURRENCY } from './scale-load.js';
import { checkPage, countingJobs, pauseSweep, cursorOf, getJson, serviceLatency, untilPinned, type ListPage } from './scale-service.js';
import { bigUserCount, bigUserNewest, content, FOLDERS_PER_USER, fileRecord, folderRecords, pinRecord, planData } from './records.js';

export interface ScaleOptions {
  files: number;
  pins: number;
  users: number;
  /** Per measurement: no new sample is started after this long. */
  budgetMs: number;
  /** Per sample (one request, one store call). */
  timeoutMs: number;
  /** The load stops after this long, keeping what it inserted. */
  loadMs: number;
}

const USAGE = `npm run bench -- --scale [--files N] [--pins N] [--users N] [--budget S] [--timeout S] [--load-minutes M]
  --files N          file records to load (default 1000000, at least 30000: the big user's
                     largest folder then has the 1,000 files its figures ask for)
  --pins N           pin requests to load (default 1000000, at least 1000)
  --users N          users, one of whom holds half of each (default 100, at least 2)
  --budget S         seconds of sampling per measurement (default 60)
  --timeout S        seconds before one request or store call counts as timed out (default 120)
  --load-minutes M   the load stops after this many minutes with what it has (default 60)`;

/** Parses the flags after `--scale`; throws with the usage on anything else. */
export function parseScaleArgs(args: string[]): ScaleOptions {
  const values: Record<string, number> = { files: 1_000_000, pins: 1_000_000, users: 100, budget: 60, timeout: 120, 'load-minutes': 60 };
  for (let i = 0; i < args.length; i++) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(args[i]!);
    const name = match?.[1];
    if (name === 'help') throw new Error(USAGE);
    if (!name || !(name in values)) throw new Error(`unknown argument ${args[i]}\n${USAGE}`);
    const text = match[2] ?? args[++i];
    const value = Number(text?.replace(/[_,]/g, ''));
    if (!text || !Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a number, not ${text ?? 'nothing'}\n${USAGE}`);
    values[name] = value;
  }
  for (const name of ['timeout', 'load-minutes']) {
    if (!(values[name]! > 0)) throw new Error(`--${name} must be more than 0\n${USAGE}`);
  }
  if (!Number.isInteger(values.users) || values.users! < 2) throw new Error(`--users must be a whole number of at least 2\n${USAGE}`);
  for (const [name, least] of [
    ['files', 30_000],
    ['pins', 1000],
  ] as const) {
    if (!Number.isInteger(values[name]) || values[name]! < least)
      throw new Error(`--${name} must be a whole number of at least ${least}\n${USAGE}`);
  }
  return {
    files: values.files!,
    pins: values.pins!,
    users: values.users!,
    budgetMs: values.budget! * 1000,
    timeoutMs: values.timeout! * 1000,
    loadMs: values['load-minutes']! * 60_000,
  };
}

export async function benchScale(ctx: BenchContext, options: ScaleOptions): Promise<number> {
  const runStart = Date.now();
  const { endpoints, user, signal } = ctx;
  const bounds = (samples: number): Bounds => ({ samples, budgetMs: options.budgetMs, timeoutMs: options.timeoutMs });
  const stack = JSON.parse(fs.readFileSync(path.join(ctx.dataDir, 'stack.json'), 'utf8')) as { pids: Record<string, number> };
  const busyPids = [stack.pids.ferretdb, ctx.api.pid, ctx.worker.pid].filter((p): p is number => typeof p === 'number' && p > 0);
  const idle = () => untilIdle(busyPids, Math.max(options.timeoutMs * 2, 60_000));
  const ferretDir = path.join(ctx.dataDir, 'ferretdb');

  // The worker's scheduled sweep would, each minute, read every record and (as Cluster has
  // none of the loaded content) signal a sync workflow for each loaded record; it would also
  // start the pin workflow of every loaded `queued` request. Paused here, the sweep is timed
  // once per phase by the bench instead.
  await pauseSweep(endpoints.temporalAddress, endpoints.temporalNamespace);
  say("scale: the worker's sweep schedule is paused; the bench times one sweep per phase itself");

  const db = await openDatabase(endpoints.mongodbUri);
  ctx.track(() => db.close());
  const kubo = createKubo(endpoints.kuboApiUrl);
  const jobs = countingJobs();
  // The sweep is the worker's own activity with the bench's components; only its signals are
  // counted rather than sent (a sync workflow per loaded record would swamp Temporal).
  const activities = createActivities({
    config: loadConfig({ ...process.env, ...ctx.env }),
    db,
    kubo,
    cluster: createClusterClient(endpoints.clusterApiUrl),
    jobs,
    logger: createLogger('warn', 'bench'),
  });

  // The other users, through the store: the big user (the admin CLI's) is users[0].
  const others: string[] = [];
  for (let i = 1; i < options.users; i++) {
    const made = await db.users.create({
      email: `scale-${i}-${user.userId.slice(4, 12)}@example.test`,
      name: `Scale ${i}`,
      plan: BENCH_PLAN,
    });
    if (!made) throw new Error('could not create a bench user');
    others.push(made._id);
  }
  const d = planData({ files: options.files, pins: options.pins }, [user.userId, ...others], Date.now() - 60_000);
  say(
    `scale: ${options.files.toLocaleString('en-US')} files, ${options.pins.toLocaleString('en-US')} pins, ${options.users} users ` +
      `(${user.userId} holds half of each)`,
  );

  // --- 1. The empty database.
  const api = { apiUrl: ctx.apiUrl, apiKey: user.apiKey, kubo, bounds: bounds(30), idle };
  say('scale: the empty database');
  const empty = await serviceLatency({ ...api, tag: 'empty' }, 3);
  const emptyMultihash = parseCid(empty.uploaded[0]!).multihash;
  await idle();
  const emptyHolds = await measure('unpin decision, db.holds.of (empty)', async () => void (await db.holds.of(emptyMultihash)), bounds(20));
  await idle();
  const emptySweep = await measure('sweep, resyncDifferences (empty)', async () => void (await activities.resyncDifferences()), bounds(3));
  const emptySignals = jobs.signals / Math.max(1, emptySweep.samples.length);
  // Every request made so far is newer than any loaded record: the deep cursors count them.
  await untilPinned(db, user.userId, empty.pinned, 120_000);
  const benchFiles = new Set(empty.uploaded).size;
  const benchPins = empty.pinned.length;
  const emptyBytes = diskUsage(ferretDir);

  // --- 2. The load.
  say(
    `scale: loading ${(options.files + options.pins).toLocaleString('en-US')} records, ${BATCH} a batch, ${LOAD_CONCURRENCY} batches at a time`,
  );
  await db.folders.model.insertMany(folderRecords(d), { ordered: false });
  const loadStart = Date.now();
  const loaded = await load(db, d, options.loadMs, signal);
  const loadSeconds = (Date.now() - loadStart) / 1000;
  d.counts = loaded;
  // Each folder's fileCount as the service would have counted its files in
  // (core/folders.ts fileMoved): counted once here, after the direct load.
  for (const folder of folderRecords(d)) {
    const fileCount = await db.files.countInFolder(folder.userId, folder._id);
    await db.folders.model.updateOne({ _id: folder._id }, { $set: { fileCount } }).exec();
  }
  const loadedTotal = loaded.files + loaded.pins;
  say(
    `scale: loaded ${loadedTotal.toLocaleString('en-US')} records in ${loadSeconds.toFixed(0)} s (${Math.round(loadedTotal / loadSeconds)}/s)`,
  );
  await idle();
  const loadedBytes = diskUsage(ferretDir);
  say(`scale: the database (${ferretDir}) takes ${Math.round(loadedBytes / 2 ** 20)} MB on disk`);

  // --- 3. The loaded database.
  say('scale: the loaded database');
  const limit = 50;
  const listUrl = (query: string) => `${ctx.apiUrl}/upload/list?${query}`;
  const firstPage = await measure(
    'GET /upload/list first page',
    async (s) => {
      const page = (await getJson(listUrl(`limit=${limit}`), user.apiKey, s)) as ListPage;
      checkPage(page.items, Math.min(limit, benchFiles + bigUserCount(d, 'files')), 'first page');
    },
    bounds(20),
  );

  // The page 10,000 items deep: the cursor of the 10,000th newest file, made as the API makes
  // it (walking 200 pages to get it would cost 200 of these requests on today's code).
  const depth = Math.min(10_000, benchFiles + bigUserCount(d, 'files') - limit);
  const deepIndex = bigUserNewest(d, 'files', depth - benchFiles);
  const deepExpected = content(d, 'files', deepIndex - 2).cid;
  await idle();
  const deepPage = await measure(
    `GET /upload/list ${depth.toLocaleString('en-US')} deep`,
    async (s) => {
      const cursor = cursorOf(fileRecord(d, deepIndex));
      const page = (await getJson(listUrl(`limit=${limit}&cursor=${cursor}`), user.apiKey, s)) as ListPage;
      checkPage(page.items, limit, 'deep page');
      if (page.items[0]!.cid !== deepExpected) throw new Error(`deep page starts at ${page.items[0]!.cid}, expected ${deepExpected}`);
    },
    bounds(20),
  );

  const folderId = d.folders.get(user.userId)![0]!;
  await idle();
  const folderPage = await measure(
    'GET /upload/list?folderId first page',
    async (s) => {
      const page = (await getJson(listUrl(`folderId=${folderId}&limit=${limit}`), user.apiKey, s)) as ListPage;
      checkPage(page.items, limit, 'folder page', (f) => (f.folderId === folderId ? undefined : `an item of folder ${f.folderId}`));
    },
    bounds(20),
  );

  // The user's folders, each with its fileCount (a count of the folder's files).
  let folderFiles = 0;
  await idle();
  const foldersPage = await measure(
    'GET /folders first page',
    async (s) => {
      const page = (await getJson(`${ctx.apiUrl}/folders?limit=${limit}`, user.apiKey, s)) as { items: { fileCount: number }[] };
      if (page.items.length !== FOLDERS_PER_USER) throw new Error(`${page.items.length} folders, expected ${FOLDERS_PER_USER}`);
      folderFiles = Math.max(...page.items.map((f) => f.fileCount));
      if (folderFiles < 1000) throw new Error(`the largest folder counts ${folderFiles} files`);
    },
    bounds(20),
  );

  // Pins: no list endpoint yet (the pinning service API, issue #12, will read this store query).
  const pinList = (after?: { createdAt: number; _id: string }) =>
    db.pins.list(user.userId, { status: 'pinned', after: after && { createdAt: after.createdAt, id: after._id }, limit: limit + 1 });
  await idle();
  const pinFirst = await measure(
    'store query: pins status=pinned first page',
    async () => checkPage(await pinList(), limit + 1, 'pins first page', (p) => (p.createdAt ? undefined : 'no createdAt')),
    bounds(20),
  );
  // The 10,000th newest `pinned` request of the user (the bench's own pins are the newest).
  const pinnedNewest: number[] = [];
  for (let i = bigUserNewest(d, 'pins', 1); i >= 0 && pinnedNewest.length < 10_000 - benchPins + 1; i -= 2) {
    if (pinRecord(d, i).status === 'pinned') pinnedNewest.push(i);
  }
  const pinDepth = Math.min(10_000, benchPins + pinnedNewest.length - 1);
  const pinCursorIndex = pinnedNewest[pinDepth - benchPins - 1]!;
  const pinExpected = content(d, 'pins', pinnedNewest[pinDepth - benchPins]!).cid;
  await idle();
  const pinDeep = await measure(
    `store query: pins status=pinned ${pinDepth.toLocaleString('en-US')} deep`,
    async () => {
      const rows = await pinList(pinRecord(d, pinCursorIndex));
      if (rows[0]?.cid !== pinExpected) throw new Error(`deep pins start at ${rows[0]?.cid}, expected ${pinExpected}`);
    },
    bounds(20),
  );

  const loadedMultihash = content(d, 'files', bigUserNewest(d, 'files', 1)).multihash;
  await idle();
  let holders = 0;
  const loadedHolds = await measure(
    'unpin decision, db.holds.of (loaded)',
    async () => {
      holders = (await db.holds.of(loadedMultihash)).holders.length;
    },
    bounds(20),
  );
  await idle();
  const before = jobs.signals;
  const loadedSweep = await measure(
    'sweep, resyncDifferences (loaded)',
    async () => void (await activities.resyncDifferences()),
    bounds(3),
  );
  const loadedSignals = (jobs.signals - before) / Math.max(1, loadedSweep.samples.length);

  await idle();
  // Storage counting of the big user: the audit's comparison and a recount, paged.
  say("scale: the big user's storage counters, compared and recounted");
  const usageLines = await usageAtScale(db, user.userId, bigUserCount(d, 'files') + bigUserCount(d, 'pins'));

  await idle();
  const full = await serviceLatency({ ...api, tag: 'loaded' }, 0);

  // --- Summary.
  const n = (v: number) => v.toLocaleString('en-US');
  const goal50 = (f: Figure) => {
    const p99 = percentile(f, 0.99);
    return `goal p99 < 50 ms: ${verdict(usable(f) && !p99.over && p99.ms < 50)}`;
  };
  // Both the median and the tail: a cost paid by one request in several (the API reuses a
  // storage figure up to 2 s old for pins) shows only in the p99.
  const ratioLine = (empty: Figure, loaded: Figure, goal: string) => {
    const [r50, r99] = [ratio(empty, loaded, 0.5), ratio(empty, loaded, 0.99)];
    const text = (r: typeof r50) => (r ? `${r.over ? '>' : ''}${r.value.toFixed(2)}` : 'n/a');
    const met = [r50, r99].every((r) => !!r && !r.over && r.value <= 1.5);
    return `empty ${describe(empty)}  loaded ${describe(loaded)}  ratio p50 ${text(r50)} p99 ${text(r99)} (${goal}: ${verdict(met)})`;
  };
  const bigFiles = bigUserCount(d, 'files');
  const bigPins = bigUserCount(d, 'pins');
  const line = (label: string, text: string) => `bench --scale: ${label.padEnd(34)} ${text}`;
  const lines = [
    line(
      'records',
      `${n(loaded.files)} files, ${n(loaded.pins)} pins, ${options.users} users, ${n(d.users.length * d.folders.get(user.userId)!.length)} folders; ` +
        `the big user holds ${n(bigFiles)} files and ${n(bigPins)} pins` +
        (loaded.files < options.files || loaded.pins < options.pins
          ? `  (asked for ${n(options.files)} / ${n(options.pins)}: the load stopped at --load-minutes)`
          : ''),
    ),
    line(
      'load',
      `${n(loadedTotal)} records in ${loadSeconds.toFixed(0)} s (${n(Math.round(loadedTotal / loadSeconds))} records/s; insertMany, ${BATCH} a batch)`,
    ),
    line(
      'database on disk',
      `${n(Math.round(loadedBytes / 2 ** 20))} MB loaded (${n(Math.round(emptyBytes / 2 ** 20))} MB empty), du of <dataDir>/ferretdb`,
    ),
    line('GET /upload/list first page', `${describe(firstPage)}  ${goal50(firstPage)}`),
    line(`GET /upload/list ${n(depth)} deep`, `${describe(deepPage)}  ${goal50(deepPage)}`),
    line('GET /upload/list?folderId', `${describe(folderPage)}  ${goal50(folderPage)}`),
    line(
      `GET /folders (${FOLDERS_PER_USER} with their fileCount)`,
      `${describe(foldersPage)}  ${goal50(foldersPage)}  [${n(folderFiles)} files in the largest]`,
    ),
    line('pins status=pinned first page', `${describe(pinFirst)}  ${goal50(pinFirst)}  [store query: no pin list endpoint yet]`),
    line(`pins status=pinned ${n(pinDepth)} deep`, `${describe(pinDeep)}  ${goal50(pinDeep)}  [store query]`),
    line('POST /upload/new (small JSON)', ratioLine(empty.upload, full.upload, 'goal <= 1.5 both')),
    line('POST /pin (answer 202)', ratioLine(empty.pin, full.pin, 'goal <= 1.5 both')),
    line(
      'unpin decision (db.holds.of)',
      `${ratioLine(emptyHolds, loadedHolds, 'goal O(holders), read as <= 1.5 both')}  [${holders} holder(s)]`,
    ),
    line(
      'sweep (resyncDifferences)',
      `${ratioLine(emptySweep, loadedSweep, 'goal incremental, read as <= 1.5 both')}  ` +
        `[signals: ${Math.round(emptySignals)} empty, ${n(Math.round(loadedSignals))} loaded; the loaded records were written directly, so the change log has none of them]`,
    ),
    ...usageLines,
    line(
      'whole run',
      `${((Date.now() - runStart) / 60_000).toFixed(1)} min from stack up (each figure: up to ${options.budgetMs / 1000} s of samples, ${options.timeoutMs / 1000} s per sample)`,
    ),
    `bench --scale: one run on one machine: ${os.cpus().length} cores, load average ${ctx.loadStart} at start, ${os.loadavg()[0]!.toFixed(1)} at end`,
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);

  // Slow is reported; a wrong answer is a failure.
  const broken = [
    firstPage,
    deepPage,
    folderPage,
    foldersPage,
    pinFirst,
    pinDeep,
    empty.upload,
    empty.pin,
    full.upload,
    full.pin,
    emptyHolds,
    loadedHolds,
    emptySweep,
    loadedSweep,
  ]
    .filter((f) => f.error)
    .map((f) => f.error!);
  for (const problem of broken) say(`broken: ${problem}`);
  return broken.length > 0 ? 1 : 0;
}
