// `npm run bench -- --migrate [--records N]`: how long the start of an upgraded API takes to give
// N files from before file ids (keyed `<userId>:<multihash>`) their own ids
// (infra/db/files-migration.ts), and what a start with nothing left to migrate costs. The
// records are written straight into the stack's database, as the version before wrote them.
import crypto from 'node:crypto';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { create as digestOf } from 'multiformats/hashes/digest';
import { parseCid } from '../../infra/ipfs/cid.js';
import { userContentKey } from '../../infra/db/by-id.js';
import { TWIN_INDEX_NAME, type FileRecord } from '../../infra/db/files.js';
import { MIGRATION_MARKER, migratedFileId, migrateFileIds } from '../../infra/db/files-migration.js';
import { openDatabase } from '../../infra/db/index.js';
import type { BenchContext } from './harness.js';

export const MIGRATE_RECORDS = 1_000_000;
const USERS = 1000;
const BATCH = 1000;

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

export async function benchFileIds(ctx: BenchContext, say: (line: string) => void, records = MIGRATE_RECORDS): Promise<number> {
  const db = await openDatabase(ctx.endpoints.mongodbUri);
  try {
    const now = Date.now();
    let t = Date.now();
    for (let i = 0; i < records; i += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, records - i) }, (_, k) => legacyRecord(i + k, now));
      await db.files.model.insertMany(batch, { ordered: false });
      if ((i + BATCH) % 100_000 === 0) say(`migrate: ${(i + BATCH).toLocaleString('en')} legacy records written`);
    }
    const writeSeconds = (Date.now() - t) / 1000;
    // The API process migrated its empty database at its start; an upgraded one is not yet.
    await db.files.model.collection.dropIndex(TWIN_INDEX_NAME).catch(() => undefined);
    await db.counters.model.deleteOne({ _id: MIGRATION_MARKER }).exec();

    let peakRss = process.memoryUsage().rss;
    const rss = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);
    t = Date.now();
    const report = await migrateFileIds(db, (n) => {
      if (n % 100_000 === 0) say(`migrate: ${n.toLocaleString('en')} migrated, ${((Date.now() - t) / 1000).toFixed(1)} s`);
    });
    clearInterval(rss);
    const second = await migrateFileIds(db);

    // Checks: every record migrated, none left, fields kept, the index built.
    const left = await db.files.model.countDocuments({ _id: { $not: /^fil_/ } }).exec();
    const total = await db.files.model.countDocuments({}).exec();
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
    const perSecond = report.migrated / (report.ms / 1000);
    process.stdout.write(
      `\nbench: migrate        ${report.migrated.toLocaleString('en')} files from before file ids in ${(report.ms / 1000).toFixed(1)} s ` +
        `(${Math.round(perSecond).toLocaleString('en')}/s; ${(1_000_000 / perSecond / 60).toFixed(1)} min per million), ` +
        `a start with nothing to migrate ${second.ms} ms; peak RSS ${Math.round(peakRss / 2 ** 20)} MB; ` +
        `writing them took ${writeSeconds.toFixed(1)} s\n` +
        `bench: migrate checks left ${left}, total ${total} of ${records}, 100 sampled intact: ${intact}, twins index: ${indexed}\n`,
    );
    return left === 0 && total === records && intact && indexed && second.migrated === 0 ? 0 : 1;
  } finally {
    await db.close();
  }
}
