// coalesceReads and rememberReads (infra/db/by-id.ts). The read here is a plain function so
// the test controls its timing and counts calls.
import { coalesceReads, rememberReads } from '../../infra/db/by-id.js';

function controlledRead() {
  const calls: { id: string; resolve: () => void; reject: (e: Error) => void }[] = [];
  let version = 0;
  const read = (id: string) =>
    new Promise<string | null>((resolve, reject) => {
      const v = ++version;
      calls.push({ id, resolve: () => resolve(id === 'missing' ? null : `${id}@${v}`), reject });
    });
  return { read, calls };
}

const turn = () => new Promise((r) => setImmediate(r));

test('callers of one turn share a read that starts after they asked; later callers get a new one', async () => {
  const { read, calls } = controlledRead();
  const get = coalesceReads(read);
  const a = get('k');
  const b = get('k');
  const other = get('j');
  expect(calls).toHaveLength(0); // nothing starts before the turn ends
  await turn();
  expect(calls.map((x) => x.id)).toEqual(['k', 'j']);
  const c = get('k'); // asked while read 1 runs: must not get read 1
  await turn();
  expect(calls.map((x) => x.id)).toEqual(['k', 'j', 'k']);
  calls[2]!.resolve();
  calls[0]!.resolve();
  calls[1]!.resolve();
  expect([await a, await b, await c, await other]).toEqual(['k@1', 'k@1', 'k@3', 'j@2']);
});

test('a failed read fails the callers that shared it only', async () => {
  const { read, calls } = controlledRead();
  const get = coalesceReads(read);
  const a = get('k');
  await turn();
  const b = get('k');
  await turn();
  calls[0]!.reject(new Error('down'));
  calls[1]!.resolve();
  await expect(a).rejects.toThrow('down');
  expect(await b).toBe('k@2');
});

test('rememberReads keeps what it found for the given time, forgets on demand, and never keeps a miss', async () => {
  const { read, calls } = controlledRead();
  const memory = rememberReads(read, 60_000);
  const first = memory.get('k');
  await turn();
  calls[0]!.resolve();
  expect(await first).toBe('k@1');
  expect(await memory.get('k')).toBe('k@1'); // remembered: no read
  expect(calls).toHaveLength(1);

  memory.forget('k');
  const again = memory.get('k');
  await turn();
  calls[1]!.resolve();
  expect(await again).toBe('k@2');

  const miss = memory.get('missing');
  await turn();
  calls[2]!.resolve();
  expect(await miss).toBeNull();
  const missAgain = memory.get('missing');
  await turn();
  expect(calls).toHaveLength(4); // a miss is read again
  calls[3]!.resolve();
  expect(await missAgain).toBeNull();
});

test('rememberReads reads again once the time is up', async () => {
  const { read, calls } = controlledRead();
  const memory = rememberReads(read, 5);
  const first = memory.get('k');
  await turn();
  calls[0]!.resolve();
  await first;
  await new Promise((r) => setTimeout(r, 10));
  const later = memory.get('k');
  await turn();
  expect(calls).toHaveLength(2);
  calls[1]!.resolve();
  expect(await later).toBe('k@2');
});

test('rememberReads counts the time from the ask, not the answer: a read slower than the time is not kept', async () => {
  const { read, calls } = controlledRead();
  const memory = rememberReads(read, 20);
  const first = memory.get('k');
  await turn();
  await new Promise((r) => setTimeout(r, 30)); // the record may have changed meanwhile
  calls[0]!.resolve();
  expect(await first).toBe('k@1');
  const next = memory.get('k');
  await turn();
  expect(calls).toHaveLength(2); // read again: what came back is already older than the time
  calls[1]!.resolve();
  expect(await next).toBe('k@2');
});
