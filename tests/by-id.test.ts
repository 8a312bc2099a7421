// coalesceReads: overlapping reads of one key share a read, and nobody gets a read that began
// before they asked. The read here is a plain function so the test controls its timing.
import { coalesceReads } from '../infra/db/by-id.js';

function controlledRead() {
  const calls: { id: string; resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
  let version = 0;
  const read = (id: string) =>
    new Promise<string>((resolve, reject) => {
      const v = ++version;
      calls.push({ id, resolve: () => resolve(`${id}@${v}`), reject });
    });
  return { read, calls };
}

const tick = () => new Promise((r) => setImmediate(r));

test('callers that arrive before a read starts share it; later ones wait for the next', async () => {
  const { read, calls } = controlledRead();
  const get = coalesceReads(read);
  const a = get('k');
  const b = get('k'); // arrives while read 1 runs: must not get read 1
  const c = get('k'); // shares read 2 with b
  const other = get('j');
  expect(calls.map((x) => x.id)).toEqual(['k', 'j']);
  calls[0]!.resolve('');
  expect(await a).toBe('k@1');
  await tick();
  expect(calls.map((x) => x.id)).toEqual(['k', 'j', 'k']);
  calls[2]!.resolve('');
  expect([await b, await c]).toEqual(['k@3', 'k@3']);
  calls[1]!.resolve('');
  expect(await other).toBe('j@2');
  // Nothing is kept: the next call reads again.
  const d = get('k');
  expect(calls).toHaveLength(4);
  calls[3]!.resolve('');
  expect(await d).toBe('k@4');
});

test('a failed read fails its callers only; the queued callers get a fresh read', async () => {
  const { read, calls } = controlledRead();
  const get = coalesceReads(read);
  const a = get('k');
  const b = get('k');
  calls[0]!.reject(new Error('down'));
  await expect(a).rejects.toThrow('down');
  await tick();
  calls[1]!.resolve('');
  expect(await b).toBe('k@2');
});
