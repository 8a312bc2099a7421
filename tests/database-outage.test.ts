// Group-committed inserts through a MongoDB-protocol server killed with SIGKILL while they are
// written: none is reported stored unless it is (npm run chaos once saw an upload acknowledged
// whose file record was never written), and none waits on after the server is back. A server of
// its own (FerretDB on a temporary directory), since it is killed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { insertUnordered } from '../infra/db/batch.js';
import { newFileId, type FileRecord } from '../infra/db/files.js';
import { openDatabase, type Database } from '../infra/db/index.js';
import { startFerretDb, type FerretDb } from '../stack/ferretdb.js';
import { freePorts } from '../stack/ports.js';

const onStackFerretDb = !process.env.MONGODB_URI;
const stackOnly = onStackFerretDb ? test : test.skip;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dir: string;
let port: number;
let server: FerretDb | undefined;
let db: Database | undefined;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-outage-'));
  port = (await freePorts(1))[0]!;
  server = await startFerretDb({ dataDir: dir, logDir: dir, port });
  db = await openDatabase(server.uri);
});

afterEach(async () => {
  await db?.close();
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** SIGKILL, as a crash would; resolves once the process is gone. */
async function kill(): Promise<void> {
  process.kill(server!.pid, 'SIGKILL');
  await server!.stop();
}

const file = (userId: string, i: number): FileRecord => {
  const now = Date.now();
  return {
    _id: newFileId(),
    userId,
    cid: `bafy-outage-${userId}-${i}`,
    multihash: `mh-${userId}-${i}`,
    name: `f${i}`,
    description: null,
    size: 1,
    mimeType: 'text/plain',
    folderId: null,
    metadata: {},
    createdAt: now,
    updatedAt: now,
  };
};

stackOnly('an unordered insert whose connection dies fails as a whole: no document is reported inserted', async () => {
  const docs = Array.from({ length: 20_000 }, (_, i) => ({ _id: `d${i}`, pad: 'x'.repeat(200) }));
  const writing = insertUnordered(db!.files.model, docs).then(
    (outcomes) => outcomes,
    (err: Error) => err,
  );
  await sleep(100);
  await kill();
  const outcome = await writing;
  expect(outcome).toBeInstanceOf(Error);
});

stackOnly(
  'file inserts through a kill and restart: every one answered stored is stored, and every one is answered',
  async () => {
    const answered: { id: string; created?: boolean; error?: string; ms: number }[] = [];
    let writing = true;
    const loop = async (userId: string) => {
      for (let i = 0; writing; i++) {
        const record = file(userId, i);
        const t = Date.now();
        await db!.files.insert(record).then(
          (r) => answered.push({ id: r.file._id, created: r.created, ms: Date.now() - t }),
          (err: Error) => answered.push({ id: record._id, error: err.name, ms: Date.now() - t }),
        );
      }
    };
    const loops = Promise.all(Array.from({ length: 16 }, (_, n) => loop(`usr_outage${n}`)));
    await sleep(500);
    await kill();
    await sleep(1_000);
    server = await startFerretDb({ dataDir: dir, logDir: dir, port });
    await sleep(2_000);
    writing = false;
    await loops;

    const stored = new Set(
      (
        await db!.files.model
          .find({ _id: { $in: answered.map((a) => a.id) } }, { _id: 1 })
          .lean()
          .exec()
      ).map((d) => d._id),
    );
    const claimed = answered.filter((a) => a.created);
    const lost = claimed.filter((a) => !stored.has(a.id));
    // Each write either lands or is resent until the server answers: a kill of a second is
    // bridged, nobody is told "failed" for a record that was stored.
    const failedButStored = answered.filter((a) => a.error && stored.has(a.id));
    expect({ lost: lost.length, failedButStored: failedButStored.length }).toEqual({ lost: 0, failedButStored: 0 });
    expect(answered.every((a) => a.created === true || a.error)).toBe(true);
    // Writes went on before and after the kill, and some were in flight across it.
    expect(claimed.length).toBeGreaterThan(100);
    expect(Math.max(...answered.map((a) => a.ms))).toBeGreaterThan(900);
    // No write waits on after the server is back: the slowest is the outage plus a little.
    expect(Math.max(...answered.map((a) => a.ms))).toBeLessThan(10_000);
  },
  60_000,
);
