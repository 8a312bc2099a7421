// groupCommit and batchedReads (infra/db/batch.ts). The write here is a plain function so the
// test controls when each batch ends and sees what each carried.
import { batchedReads, groupCommit, MAX_BATCH } from '../../infra/db/batch.js';
import { STAMPS_KEPT, tookSequence } from '../../infra/db/ipns-names.js';

function controlledWrite() {
  const batches: { entries: string[]; end: (results?: (string | Error)[]) => void; fail: (e: Error) => void }[] = [];
  const write = (entries: string[]) =>
    new Promise<(string | Error)[]>((resolve, reject) => {
      batches.push({ entries: [...entries], end: (results) => resolve(results ?? entries.map((e) => `${e}!`)), fail: reject });
    });
  return { write, batches };
}

const turn = () => new Promise((r) => setImmediate(r));
/** A batch is written a turn after it opens (or after the write before it ends): two turns. */
const settle = async () => {
  await turn();
  await turn();
};

test('entries of one turn go together; entries that come during a write wait for it and go together next', async () => {
  const { write, batches } = controlledWrite();
  const commit = groupCommit(write);
  const a = commit('a');
  const b = commit('b');
  expect(batches).toHaveLength(0); // nothing is written before the turn ends
  await settle();
  expect(batches.map((x) => x.entries)).toEqual([['a', 'b']]);
  const c = commit('c');
  await settle();
  const d = commit('d');
  await settle();
  // c and d arrived while the first write ran: no second write yet, one batch of both next.
  expect(batches).toHaveLength(1);
  batches[0]!.end();
  await settle();
  expect(batches.map((x) => x.entries)).toEqual([
    ['a', 'b'],
    ['c', 'd'],
  ]);
  batches[1]!.end();
  expect([await a, await b, await c, await d]).toEqual(['a!', 'b!', 'c!', 'd!']);
});

test('each entry gets its own outcome; a failed write fails its batch only, and the next one still goes', async () => {
  const { write, batches } = controlledWrite();
  const commit = groupCommit(write);
  const ok = commit('ok');
  const bad = commit('bad');
  await settle();
  const later = commit('later');
  batches[0]!.end(['fine', new Error('duplicate')]);
  expect(await ok).toBe('fine');
  await expect(bad).rejects.toThrow('duplicate');
  await settle();
  const after = commit('after');
  batches[1]!.fail(new Error('down'));
  await expect(later).rejects.toThrow('down');
  await settle();
  expect(batches.map((x) => x.entries)).toEqual([['ok', 'bad'], ['later'], ['after']]);
  batches[2]!.end();
  expect(await after).toBe('after!');
});

test('batched reads ask for each key once per batch and answer every caller, null when not found', async () => {
  const asked: string[][] = [];
  const read = batchedReads(async (keys) => {
    asked.push(keys);
    return new Map(keys.filter((k) => k !== 'missing').map((k) => [k, `${k}@${asked.length}`]));
  });
  const got = await Promise.all([read('k'), read('j'), read('k'), read('missing')]);
  expect(got).toEqual(['k@1', 'j@1', 'k@1', null]);
  expect(asked).toEqual([['k', 'j', 'missing']]);
  expect(await read('k')).toBe('k@2'); // a later read is a new read
});

test('a batch takes at most MAX_BATCH entries; the rest go in the next one', async () => {
  const { write, batches } = controlledWrite();
  const commit = groupCommit(write);
  const all = Array.from({ length: MAX_BATCH + 5 }, (_, i) => commit(`e${i}`));
  await settle();
  expect(batches.map((x) => x.entries.length)).toEqual([MAX_BATCH]);
  batches[0]!.end();
  await settle();
  expect(batches.map((x) => x.entries.length)).toEqual([MAX_BATCH, 5]);
  batches[1]!.end();
  expect((await Promise.all(all)).at(-1)).toBe(`e${MAX_BATCH + 4}!`);
});

test('a batched publish knows whether its statement took the sequence, though later publishes of the name came between', () => {
  const stamps = (...entries: [number, string][]) => entries.map(([q, s]) => `${q}:${s}`);
  // Its own entry, then another process's batch took sequence 8 before the read (the case that
  // used to be taken for a miss: the name was then advanced a second time).
  expect(tookSequence({ sequence: 8, publishStamps: stamps([7, 'mine'], [8, 'theirs']) }, 7, 'mine')).toBe(true);
  // Another batch's statement took it.
  expect(tookSequence({ sequence: 8, publishStamps: stamps([7, 'theirs'], [8, 'more']) }, 7, 'mine')).toBe(false);
  // A publish alone took it (it keeps no entry), or nothing reached it yet.
  expect(tookSequence({ sequence: 9, publishStamps: stamps([5, 'old'], [9, 'later']) }, 7, 'mine')).toBe(false);
  expect(tookSequence({ sequence: 6, publishStamps: stamps([6, 'old']) }, 7, 'mine')).toBe(false);
  expect(tookSequence({ sequence: 7 }, 7, 'mine')).toBe(false);
  expect(tookSequence(undefined, 7, 'mine')).toBe(false);
  // So many batched publishes since that its entry is gone: not knowable.
  const full = Array.from({ length: STAMPS_KEPT }, (_, i): [number, string] => [8 + i, `p${i}`]);
  expect(tookSequence({ sequence: 7 + STAMPS_KEPT, publishStamps: stamps(...full) }, 7, 'mine')).toBeUndefined();
  // A full list that begins before the sequence still tells.
  const from6 = Array.from({ length: STAMPS_KEPT }, (_, i): [number, string] => [6 + i, i === 1 ? 'mine' : `p${i}`]);
  expect(tookSequence({ sequence: 5 + STAMPS_KEPT, publishStamps: stamps(...from6) }, 7, 'mine')).toBe(true);
});
