// The database at scale (issue #9): the stack's FerretDB is patched
// (stack/patches/ferretdb/) to answer filters and sorts through SQLite's indexes and to
// make single-document updates atomic. A pushdown must never change a result, so this
// differential test runs the same finds on the server and on the documents filtered and
// sorted here, by MongoDB's rules, over mixed types, missing fields, nulls, arrays and dotted
// paths. On a user's MongoDB (MONGODB_URI) the same comparisons hold; the query-plan checks
// apply to the stack's FerretDB only.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mongoose from 'mongoose';
import { startFerretDb } from '../stack/ferretdb.js';
import { freePorts } from '../stack/ports.js';

const { ObjectId, Double } = mongoose.mongo;
type Doc = Record<string, unknown> & { _id: string };
type Filter = Record<string, unknown>;
type Sort = Record<string, 1 | -1>;

const onStackFerretDb = !process.env.MONGODB_URI;
const stackOnly = onStackFerretDb ? test : test.skip;

function uri(): string {
  const value = process.env.STUPA_TEST_MONGODB_URI;
  if (!value) throw new Error('STUPA_TEST_MONGODB_URI is not set: run through stack/run-tests.ts (npm test)');
  return value;
}

// ---- MongoDB's comparison and matching rules, for the values this test stores ----

/** BSON comparison order of a value's type (null and missing compare equal). */
function rank(v: unknown): number {
  if (v === undefined || v === null) return 1;
  if (typeof v === 'number') return 2;
  if (typeof v === 'string') return 3;
  if (Array.isArray(v)) return 5;
  if (v instanceof ObjectId) return 7;
  if (typeof v === 'boolean') return 8;
  if (v instanceof Date) return 9;
  return 4;
}

function compare(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  switch (ra) {
    case 2:
      return (a as number) - (b as number);
    case 3:
      return Buffer.compare(Buffer.from(a as string), Buffer.from(b as string));
    case 7:
      return (a as InstanceType<typeof ObjectId>).toHexString().localeCompare((b as InstanceType<typeof ObjectId>).toHexString());
    case 8:
      return Number(a) - Number(b);
    case 9:
      return (a as Date).getTime() - (b as Date).getTime();
    default:
      return 0;
  }
}

function get(doc: Doc, field: string): unknown {
  return field.split('.').reduce<unknown>((v, key) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined), doc);
}

const equals = (v: unknown, literal: unknown) =>
  literal === null ? v === null || v === undefined : rank(v) === rank(literal) && compare(v, literal) === 0;

/** A field's condition; an array matches when one of its elements does. */
function fieldMatches(v: unknown, cond: unknown): boolean {
  const isOps =
    cond !== null &&
    typeof cond === 'object' &&
    !(cond instanceof Date) &&
    !(cond instanceof ObjectId) &&
    Object.keys(cond).every((k) => k.startsWith('$'));
  const one = (x: unknown): boolean => {
    if (!isOps) return equals(x, cond);
    return Object.entries(cond as Record<string, unknown>).every(([op, arg]) => {
      const c = rank(x) === rank(arg) ? compare(x, arg) : NaN;
      switch (op) {
        case '$eq':
          return equals(x, arg);
        case '$in':
          return (arg as unknown[]).some((a) => equals(x, a));
        case '$gt':
          return c > 0;
        case '$gte':
          return c >= 0;
        case '$lt':
          return c < 0;
        case '$lte':
          return c <= 0;
        default:
          throw new Error(`operator ${op} is not modelled here`);
      }
    });
  };
  return Array.isArray(v) ? v.some(one) : one(v);
}

function matches(doc: Doc, filter: Filter): boolean {
  return Object.entries(filter).every(([key, cond]) => {
    if (key === '$and') return (cond as Filter[]).every((f) => matches(doc, f));
    if (key === '$or') return (cond as Filter[]).some((f) => matches(doc, f));
    return fieldMatches(get(doc, key), cond);
  });
}

/** Sort key of a value: an array sorts by its least element ascending, its greatest descending. */
function sortKey(v: unknown, dir: 1 | -1): unknown {
  if (!Array.isArray(v)) return v;
  return [...v].sort((a, b) => compare(a, b) * dir)[0];
}

function expected(docs: Doc[], filter: Filter, sort: Sort, skip = 0, limit = 0): string[] {
  const sorted = docs
    .filter((d) => matches(d, filter))
    .sort((a, b) => {
      for (const [field, dir] of Object.entries(sort)) {
        const c = compare(sortKey(get(a, field), dir), sortKey(get(b, field), dir)) * dir;
        if (c !== 0) return c;
      }
      return 0;
    });
  return sorted.slice(skip, limit ? skip + limit : undefined).map((d) => d._id);
}

// ---- the data: a deterministic mix of types ----

function makeDocs(count: number): Doc[] {
  // mulberry32: a small PRNG whose low bits are as random as its high ones.
  let seed = 7;
  const next = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const docs: Doc[] = [];
  for (let i = 0; i < count; i++) {
    const doc: Doc = { _id: `d${String(i).padStart(4, '0')}`, seq: i };
    const a = next(20);
    if (a < 16) doc.a = ['x', 'y', 'z', 'é'][a % 4];
    else if (a === 16) doc.a = 1;
    else if (a === 17) doc.a = null;
    // 18, 19: missing
    const b = next(8);
    const v = next(40);
    if (b === 0 || b === 1) doc.b = v;
    else if (b === 2) doc.b = v + 0.5;
    else if (b === 3) doc.b = new Date(1_700_000_000_000 + v * 1000);
    else if (b === 4) doc.b = `b${v % 5}`;
    else if (b === 5) doc.b = v % 2 === 0;
    else if (b === 6) doc.b = null;
    if (next(5) > 0) doc.c = new ObjectId(crypto.createHash('sha256').update(String(i)).digest('hex').slice(0, 24));
    doc.n = next(2) ? next(6) : next(6) + 0.25;
    doc.o = { x: next(3) };
    doc.t = next(3) === 0 ? [`t${next(4)}`, `t${next(4)}`] : `t${next(4)}`;
    docs.push(doc);
  }
  // A double that equals an int: equality and order do not depend on the numeric type.
  docs.push({ _id: 'double-three', seq: count, a: 'x', b: 3, n: new Double(3) as unknown as number, o: { x: 0 }, t: 't0' });
  return docs;
}

/** The BSON double above comes back as a plain number; the model compares numbers. */
const model = (docs: Doc[]) => docs.map((d) => (d.n instanceof Double ? { ...d, n: d.n.valueOf() } : d));

const queries: Array<{ filter: Filter; sort: Sort; skip?: number; limit?: number }> = [
  { filter: { a: 'x' }, sort: { b: -1, _id: 1 }, limit: 10 },
  { filter: { a: 'x', b: { $lt: 20 } }, sort: { b: -1, _id: 1 } },
  { filter: { a: 'y', b: { $gte: new Date(1_700_000_010_000) } }, sort: { b: 1, _id: 1 } },
  { filter: { b: { $in: [3, 4.5, 7] } }, sort: { _id: -1 } },
  { filter: { a: null }, sort: { seq: 1 } },
  { filter: { a: { $in: ['x', 'z'] }, $or: [{ b: { $lt: 5 } }, { b: 'b1' }] }, sort: { seq: -1 }, skip: 2, limit: 7 },
  { filter: { $and: [{ a: 'z' }, { b: { $gt: 10 } }, { b: { $lte: 30 } }] }, sort: { b: 1, _id: -1 } },
  { filter: { 'o.x': 1 }, sort: { a: 1, _id: 1 } },
  { filter: { t: 't2' }, sort: { seq: 1 } },
  { filter: {}, sort: { b: 1, _id: 1 }, limit: 60 },
  { filter: {}, sort: { b: -1, _id: -1 }, skip: 100, limit: 40 },
  { filter: { c: { $gt: new ObjectId('800000000000000000000000') } }, sort: { c: -1 } },
  { filter: { b: true }, sort: { seq: 1 } },
  { filter: { n: 3 }, sort: { _id: 1 } },
  { filter: { a: 'x' }, sort: { t: 1, _id: 1 } },
  { filter: { a: 'x' }, sort: { t: -1, _id: 1 } },
  { filter: { b: { $lt: 'b3' } }, sort: { b: -1, _id: 1 } },
  { filter: { a: 'é', _id: { $gte: 'd0100' } }, sort: { _id: 1 }, limit: 5 },
  { filter: { a: 1 }, sort: { n: -1, _id: 1 } },
  { filter: { a: { $eq: 'y' }, n: { $gte: 2, $lt: 4 } }, sort: { n: 1, _id: 1 } },
  // A batch of reads by _id (infra/db/batch.ts), with ids that do not exist.
  { filter: { _id: { $in: ['d0003', 'd0150', 'missing', 'double-three', 'd0150'] } }, sort: { _id: 1 } },
  { filter: { _id: { $in: ['d0001', 'd0002', 'd0003', 'd0004', 'd0005', 'd0006'] }, a: 'x' }, sort: { seq: -1 } },
];

describe('finds give MongoDB results whatever is pushed down', () => {
  let conn: mongoose.Connection;
  let things: mongoose.mongo.Collection<Doc>;
  const docs = makeDocs(400);

  beforeAll(async () => {
    conn = await mongoose.createConnection(uri()).asPromise();
    things = conn.db!.collection<Doc>(`pushdown_${crypto.randomBytes(4).toString('hex')}`);
    await things.createIndex({ a: 1, b: -1, _id: 1 });
    await things.createIndex({ b: 1 });
    await things.createIndex({ n: 1 });
    await things.createIndex({ c: -1 });
    await things.createIndex({ t: 1, seq: 1 });
    await things.insertMany(docs);
  });

  afterAll(async () => {
    await things.drop();
    await conn.close();
  });

  test.each(queries.map((q, i) => [i, q] as const))('query %i', async (_i, q) => {
    let cursor = things.find(q.filter).sort(q.sort);
    if (q.skip) cursor = cursor.skip(q.skip);
    if (q.limit) cursor = cursor.limit(q.limit);
    const got = (await cursor.toArray()).map((d) => d._id);
    const want = expected(model(docs), q.filter, q.sort, q.skip, q.limit);
    expect(want.length).toBeGreaterThan(0);
    expect(got).toEqual(want);
  });

  test.each(queries.map((q, i) => [i, q] as const))('count of query %i', async (_i, q) => {
    const want = docs.filter((d) => matches(model([d])[0]!, q.filter)).length;
    const counted = (await conn.db!.command({ count: things.collectionName, query: q.filter })) as { n: number };
    expect(counted.n).toBe(want);
    const window = (await conn.db!.command({ count: things.collectionName, query: q.filter, skip: 3, limit: 5 })) as { n: number };
    expect(window.n).toBe(Math.min(Math.max(want - 3, 0), 5));
  });

  stackOnly('a page of one value, newest first, is read from the index in order', async () => {
    const explained = (await things
      .find({ a: 'x', b: { $lt: 20 } })
      .sort({ b: -1, _id: 1 })
      .limit(10)
      .explain()) as {
      queryPlanner?: { Plan?: string[] };
      sortPushdown?: boolean;
      filterPushdown?: boolean;
    };
    const plan = (explained.queryPlanner?.Plan ?? []).join('\n');
    expect(plan).toMatch(/SEARCH .* USING INDEX \S*a_1_b_-1__id_1/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    expect(explained.sortPushdown).toBe(true);
    expect(explained.filterPushdown).toBe(true);
  });

  stackOnly('a batch of _ids is looked up in the _id index, for finds and updates', async () => {
    const ids = ['d0007', 'd0008', 'nope'];
    const explained = (await things.find({ _id: { $in: ids } }).explain()) as {
      queryPlanner?: { Plan?: string[] };
      filterPushdown?: boolean;
    };
    const plan = (explained.queryPlanner?.Plan ?? []).join('\n');
    expect(plan).toMatch(/SEARCH .* USING INDEX/);
    expect(plan).not.toMatch(/SCAN/);
    expect(explained.filterPushdown).toBe(true);
    const updated = await things.updateMany({ _id: { $in: ids } }, { $set: { batched: true } } as mongoose.mongo.UpdateFilter<Doc>);
    expect(updated.matchedCount).toBe(2);
  });

  stackOnly('a field that holds arrays is filtered and sorted by the server, not SQLite', async () => {
    const explained = (await things.find({ t: 't2' }).sort({ t: 1 }).explain()) as { sortPushdown?: boolean; filterPushdown?: boolean };
    expect(explained.filterPushdown).toBe(false);
    expect(explained.sortPushdown).toBe(false);
  });
});

describe('a field that starts holding arrays', () => {
  stackOnly('stops being pushed down from that write on, also after a restart', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-ferretdb-'));
    const port = (await freePorts(1))[0]!;
    let server = await startFerretDb({ dataDir: dir, logDir: dir, port });
    try {
      let conn = await mongoose.createConnection(server.uri).asPromise();
      let things = conn.db!.collection<Doc>('things');
      await things.createIndex({ k: 1, s: 1 });
      await things.insertMany(Array.from({ length: 30 }, (_, i) => ({ _id: `p${i}`, k: i % 2 ? 'p' : 'q', s: i + 1 })));
      const page = () => things.find({ k: 'p' }).sort({ s: 1 }).limit(3).toArray();
      const pushed = async () => ((await things.find({ k: 'p' }).sort({ s: 1 }).explain()) as { filterPushdown?: boolean }).filterPushdown;
      expect((await page()).map((d) => d._id)).toEqual(['p1', 'p3', 'p5']);
      expect(await pushed()).toBe(true);

      await things.insertOne({ _id: 'both', k: ['q', 'p'], s: 0 });
      expect((await page()).map((d) => d._id)).toEqual(['both', 'p1', 'p3']);
      expect(await pushed()).toBe(false);

      await conn.close();
      await server.stop();
      server = await startFerretDb({ dataDir: dir, logDir: dir, port });
      conn = await mongoose.createConnection(server.uri).asPromise();
      things = conn.db!.collection<Doc>('things');
      expect(await pushed()).toBe(false);
      expect((await page()).map((d) => d._id)).toEqual(['both', 'p1', 'p3']);
      await conn.close();
    } finally {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('concurrent updates of one document lose nothing', async () => {
  const conn = await mongoose.createConnection(uri()).asPromise();
  const counters = conn.db!.collection<{ _id: string; n: number }>(`counters_${crypto.randomBytes(4).toString('hex')}`);
  try {
    await counters.insertOne({ _id: 'c', n: 0 });
    await Promise.all(Array.from({ length: 200 }, () => counters.updateOne({ _id: 'c' }, { $inc: { n: 1 } })));
    expect((await counters.findOne({ _id: 'c' }))?.n).toBe(200);
    const before = await Promise.all(
      Array.from({ length: 100 }, () => counters.findOneAndUpdate({ _id: 'c' }, { $inc: { n: 1 } }, { returnDocument: 'before' })),
    );
    expect((await counters.findOne({ _id: 'c' }))?.n).toBe(300);
    // Each findOneAndUpdate saw a different value: none read a document another was changing.
    expect(new Set(before.map((d) => d?.n)).size).toBe(100);
  } finally {
    await counters.drop();
    await conn.close();
  }
});

test('an update command of 250 statements (a bulkWrite of updateOne) completes, and the server goes on answering', async () => {
  const conn = await mongoose.createConnection(uri()).asPromise();
  const docs = conn.db!.collection<{ _id: string; n: number }>(`bulk_${crypto.randomBytes(4).toString('hex')}`);
  try {
    await docs.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: `d${i}`, n: 0 })));
    // Before patch 0005 each statement held a connection of the pool's 100 until the command
    // ended: this command waited for ever, and so did every request after it.
    const written = await docs.bulkWrite(
      Array.from({ length: 250 }, (_, i) => ({
        updateOne: { filter: { _id: `d${i}` }, update: { $set: { n: i + 1 } }, upsert: true },
      })),
      { ordered: false },
    );
    expect(written.modifiedCount + written.upsertedCount).toBe(250);
    expect(await docs.countDocuments({ n: { $gt: 0 } })).toBe(250);
    expect((await docs.findOne({ _id: 'd249' }))?.n).toBe(250);
  } finally {
    await docs.drop();
    await conn.close();
  }
}, 30_000);

// Patch 0007 reads the documents an update command's statements name by _id at once, and writes
// the documents it changes together: each statement must still see what the statements before
// it changed, and a failing one must leave theirs written.
test('an update command changes its documents in statement order, written together', async () => {
  const conn = await mongoose.createConnection(uri()).asPromise();
  type Counted = { _id: string | mongoose.mongo.ObjectId; n: number; k: string };
  const docs = conn.db!.collection<Counted>(`together_${crypto.randomBytes(4).toString('hex')}`);
  const oid = new ObjectId();
  try {
    await docs.createIndex({ k: 1, n: 1 });
    await docs.insertMany([...Array.from({ length: 8 }, (_, i) => ({ _id: `a${i}`, n: 0, k: 'x' })), { _id: oid, n: 0, k: 'x' }]);
    const written = await docs.bulkWrite([
      { updateOne: { filter: { _id: 'a0' }, update: { $inc: { n: 1 } } } },
      { updateOne: { filter: { _id: 'a1' }, update: { $inc: { n: 1 } } } },
      // The same document again: it reads the first statement's change.
      { updateOne: { filter: { _id: 'a0' }, update: { $inc: { n: 1 } } } },
      // A filter on another field: it reads both changes (a0 now has n 2, a1 n 1).
      { updateMany: { filter: { n: 1 }, update: { $set: { k: 'one' } } } },
      { updateOne: { filter: { _id: oid }, update: { $set: { k: 'oid' } } } },
      { updateOne: { filter: { _id: 'new' }, update: { $set: { n: 5, k: 'up' } }, upsert: true } },
      // The document the upsert made, and one that does not exist.
      { updateOne: { filter: { _id: 'new' }, update: { $inc: { n: 1 } } } },
      { updateOne: { filter: { _id: 'none' }, update: { $set: { k: 'z' } } } },
      { updateMany: { filter: { _id: { $in: ['a2', 'a3'] } }, update: { $inc: { n: 10 } } } },
      { updateOne: { filter: { _id: 'a2' }, update: { $inc: { n: 1 } } } },
      // Changes nothing: matched, not modified, not written.
      { updateOne: { filter: { _id: 'a4' }, update: { $set: { k: 'x' } } } },
    ]);
    expect(written.matchedCount).toBe(10);
    expect(written.modifiedCount).toBe(9);
    expect(written.upsertedCount).toBe(1);
    const byId = async (id: string | mongoose.mongo.ObjectId) => {
      const doc = await docs.findOne({ _id: id });
      return doc && { n: doc.n, k: doc.k };
    };
    expect(await byId('a0')).toEqual({ n: 2, k: 'x' });
    expect(await byId('a1')).toEqual({ n: 1, k: 'one' });
    expect(await byId('a2')).toEqual({ n: 11, k: 'x' });
    expect(await byId('a3')).toEqual({ n: 10, k: 'x' });
    expect(await byId(oid)).toEqual({ n: 0, k: 'oid' });
    expect(await byId('new')).toEqual({ n: 6, k: 'up' });
    expect(await byId('none')).toBeNull();
    // The index on k was kept with the writes: a pushed-down read finds them.
    expect((await docs.find({ k: 'one' }).toArray()).map((d) => d._id)).toEqual(['a1']);

    // A statement that fails (an $inc of a string) leaves the earlier statements' changes written.
    await expect(
      docs.bulkWrite([
        { updateOne: { filter: { _id: 'a5' }, update: { $inc: { n: 1 } } } },
        { updateMany: { filter: { _id: { $in: ['a6', 'a7'] } }, update: { $inc: { n: 1 } } } },
        { updateOne: { filter: { _id: 'a1' }, update: { $inc: { k: 1 } } as unknown as mongoose.mongo.UpdateFilter<Counted> } },
      ]),
    ).rejects.toThrow();
    expect(await byId('a5')).toEqual({ n: 1, k: 'x' });
    expect(await byId('a6')).toEqual({ n: 1, k: 'x' });
    expect(await byId('a7')).toEqual({ n: 1, k: 'x' });
    expect(await byId('a1')).toEqual({ n: 1, k: 'one' });
  } finally {
    await docs.drop();
    await conn.close();
  }
});
