// The stack's FerretDB keeps its SQL statements prepared (stack/patches/ferretdb/
// 0008-kept-statements.patch): a statement is compiled once per connection and run again with
// new values. A kept statement must never answer for a schema that changed under it, the
// bound on kept texts must not lose one in use, and a transaction that meets a text first
// must not wait for a second connection (transactions holding every connection of the pool
// would then wait for ever). On a user's MongoDB the same outcomes hold.
import crypto from 'node:crypto';
import mongoose from 'mongoose';

type Doc = { _id: string; n: number; tag?: string };

function uri(): string {
  const value = process.env.STUPA_TEST_MONGODB_URI;
  if (!value) throw new Error('STUPA_TEST_MONGODB_URI is not set: run through stack/run-tests.ts (npm test)');
  return value;
}

let conn: mongoose.Connection;
beforeAll(async () => {
  conn = await mongoose.createConnection(uri(), { maxPoolSize: 200 }).asPromise();
});
afterAll(async () => {
  await conn.close();
});

const suffix = () => crypto.randomBytes(4).toString('hex');

test('a collection dropped and made again, with other indexes, answers from its new table', async () => {
  const name = `kept_${suffix()}`;
  const first = conn.db!.collection<Doc>(name);
  await first.createIndex({ n: 1 });
  await first.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: `a${i}`, n: i })));
  // The same texts, run again and again: kept after the first run.
  for (let i = 0; i < 3; i++) {
    expect(await first.countDocuments({ n: { $gte: 40, $lt: 50 } })).toBe(10);
    await first.updateOne({ _id: 'a1' }, { $inc: { n: 100 } });
  }
  expect((await first.findOne({ _id: 'a1' }))?.n).toBe(301);

  await first.drop();
  const again = conn.db!.collection<Doc>(name);
  await again.createIndex({ tag: 1 });
  await again.createIndex({ n: -1 });
  await again.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `b${i}`, n: i * 10, tag: i % 2 ? 'odd' : 'even' })));
  expect(await again.countDocuments({ n: { $gte: 40 } })).toBe(16);
  expect(await again.findOne({ _id: 'a1' })).toBeNull();
  await again.updateOne({ _id: 'b1' }, { $inc: { n: 5 } });
  expect((await again.findOne({ _id: 'b1' }))?.n).toBe(15);
  expect((await again.find({ tag: 'odd' }).sort({ n: -1 }).limit(2).toArray()).map((d) => d._id)).toEqual(['b19', 'b17']);
  await again.drop();
});

test('more statement texts than are kept, run concurrently, each answer its own', async () => {
  const things = conn.db!.collection<Doc>(`kept_${suffix()}`);
  await things.insertMany(Array.from({ length: 400 }, (_, i) => ({ _id: `d${i}`, n: i })));
  // An `$in` of k ids is a text of its own: 400 texts, past the 256 kept, 32 at a time.
  const sizes = Array.from({ length: 400 }, (_, i) => i + 1);
  for (let at = 0; at < sizes.length; at += 32) {
    await Promise.all(
      sizes.slice(at, at + 32).map(async (k) => {
        const ids = Array.from({ length: k }, (_, i) => `d${i}`);
        const found = await things.find({ _id: { $in: ids } }).toArray();
        expect(found.length).toBe(k);
        expect(found.reduce((sum, d) => sum + d.n, 0)).toBe((k * (k - 1)) / 2);
      }),
    );
  }
  // The first texts were let go; they are prepared again.
  expect(await things.countDocuments({ _id: { $in: ['d0', 'd1'] } })).toBe(2);
  await things.drop();
}, 60_000);

test('transactions that each meet a statement first do not wait for a connection of their own', async () => {
  // Each insert runs in a transaction, with a text (its table) not met before: 150 at once, more
  // than the server's pool of 100 connections.
  const collections = Array.from({ length: 150 }, () => conn.db!.collection<Doc>(`kept_${suffix()}`));
  for (const c of collections) await conn.db!.createCollection(c.collectionName);
  const written = await Promise.all(collections.map((c, i) => c.insertOne({ _id: 'x', n: i })));
  expect(written.every((w) => w.acknowledged)).toBe(true);
  const read = await Promise.all(collections.map((c) => c.findOne({ _id: 'x' })));
  expect(read.map((d) => d?.n)).toEqual(collections.map((_, i) => i));
  for (const c of collections) await c.drop();
}, 120_000);
