// infra/ipfs/unixfs-file.ts against Kubo: parts added one by one with the unixfs-v1-2025 profile,
// then assembled, give the CID and DAG size of Kubo's add of the whole bytes at once. Parts of
// whole 1 MiB chunks are linked (one leaf, one node, a full node, a second level, a subtree
// boundary inside a part, a part root two levels deep); other part sizes, and parts not laid
// out by the profile, are added again.
import crypto from 'node:crypto';
import { CHUNK_BYTES, UNIXFS_ADD_OPTIONS } from '../infra/constants.js';
import { addStream } from '../infra/ipfs/kubo.js';
import { assembleFile, PartSizeError, type AssembledFile, type PartContent } from '../infra/ipfs/unixfs-file.js';
import { kubo, MiB } from './support/content.js';
import { stack } from './support/stack.js';

const ADD = { ...UNIXFS_ADD_OPTIONS, pin: false };

/**
 * Bytes [start, end) of the object named `seed`: an AES-256-CTR keystream, so any range is
 * made on its own (the counter block is the offset / 16), 1 MiB at a time, at GB/s.
 */
async function* range(seed: string, start: number, end: number): AsyncGenerator<Uint8Array> {
  const key = crypto.createHash('sha256').update(seed).digest();
  const iv = Buffer.alloc(16);
  iv.writeBigUInt64BE(BigInt(Math.floor(start / 16)), 8);
  const cipher = crypto.createCipheriv('aes-256-ctr', key, iv);
  let skip = start % 16;
  for (let at = start; at < end;) {
    const n = Math.min(MiB, end - at);
    yield cipher.update(Buffer.alloc(skip + n)).subarray(skip);
    skip = 0;
    at += n;
  }
}

/** Adds each part of the object `seed` (cut at `sizes`, from `offset`) as its own file. */
async function addParts(seed: string, sizes: number[], offset = 0): Promise<PartContent[]> {
  const parts: PartContent[] = [];
  for (const size of sizes) {
    const { cid } = await addStream(stack.kuboApiUrl, range(seed, offset, offset + size), ADD);
    parts.push({ cid, size });
    offset += size;
  }
  return parts;
}

/** Assembles `parts`, timed; `before` runs after the assembly and before the whole add. */
async function assembleAndCompare(
  seed: string,
  parts: PartContent[],
  reused: boolean,
  before?: (file: AssembledFile) => Promise<void>,
): Promise<{ file: AssembledFile; ms: number }> {
  const t = performance.now();
  const file = await assembleFile(kubo(), stack.kuboApiUrl, parts);
  const ms = performance.now() - t;
  await before?.(file);
  const size = parts.reduce((sum, part) => sum + part.size, 0);
  const whole = await addStream(stack.kuboApiUrl, range(seed, 0, size), ADD);
  expect(file).toEqual({ cid: whole.cid, dagSize: whole.dagSize, size, reused });
  return { file, ms };
}

const check = async (seed: string, sizes: number[], reused: boolean) => assembleAndCompare(seed, await addParts(seed, sizes), reused);

const sha256 = async (source: AsyncIterable<Uint8Array>) => {
  const hash = crypto.createHash('sha256');
  for await (const chunk of source) hash.update(chunk);
  return hash.digest('hex');
};

test('one leaf, one node: 10 bytes, exactly 1 MiB, 1 MiB + 10 in two parts, 5 MiB x 3 + 123', async () => {
  const single = await check('ten', [10], true);
  expect(single.file.cid).toMatch(/^bafkrei/); // a single chunk is the file: its raw block
  expect((await check('one-mib', [CHUNK_BYTES], true)).file.cid).toMatch(/^bafkrei/);
  expect((await check('mib-and-ten', [CHUNK_BYTES, 10], true)).file.cid).toMatch(/^bafybei/);
  await check('sdk-parts', [5 * MiB, 5 * MiB, 5 * MiB, 123], true);
  // An empty last part adds no chunk.
  await check('empty-last', [5 * MiB, 0], true);
});

test('no bytes: what Kubo adds for an empty file', async () => {
  const { file } = await check('empty', [0], true);
  expect(file).toMatchObject({ size: 0, dagSize: 0 });
});

test('8 MiB parts: 1024 chunks fill one node; one more chunk makes a second level', async () => {
  const parts = await addParts('eight', Array<number>(128).fill(8 * MiB));
  const full = await assembleAndCompare('eight', parts, true);
  const [last] = await addParts('eight', [MiB], 1024 * MiB);
  const deeper = await assembleAndCompare('eight', [...parts, last!], true);
  expect(deeper.file.cid).not.toBe(full.file.cid);
  process.stderr.write(`[unixfs-file] 128 x 8 MiB: ${full.ms.toFixed(0)} ms; + 1 MiB (1025 chunks): ${deeper.ms.toFixed(0)} ms\n`);
}, 600_000);

test('600 MiB, 600 MiB, 3 MiB + 5: a subtree boundary inside a part; the bytes read back', async () => {
  const seed = 'six-hundred';
  const parts = await addParts(seed, [600 * MiB, 600 * MiB, 3 * MiB + 5]);
  const size = parts.reduce((sum, part) => sum + part.size, 0);
  // Read back before the whole add could store the same blocks: the new nodes are in Kubo.
  const readBack = async (file: AssembledFile) => {
    const signal = AbortSignal.timeout(300_000);
    expect(await sha256(kubo().cat(file.cid, { signal }))).toBe(await sha256(range(seed, 0, size)));
  };
  const { ms } = await assembleAndCompare(seed, parts, true, readBack);
  process.stderr.write(`[unixfs-file] 600 + 600 + 3 MiB (1204 chunks, 3 parts): ${ms.toFixed(0)} ms\n`);
}, 900_000);

test('a part over 1024 MiB: its root is two levels deep', async () => {
  const { ms } = await check('deep-part', [1030 * MiB, 2 * MiB], true);
  process.stderr.write(`[unixfs-file] 1030 + 2 MiB (1032 chunks, 2 parts): ${ms.toFixed(0)} ms\n`);
}, 900_000);

test('parts off the 1 MiB grid are added again', async () => {
  await check('unaligned', [5 * MiB + 7, 5 * MiB, 1], false);
});

test('aligned parts not laid out by the profile (dag-pb leaves) are added again', async () => {
  const seed = 'other-layout';
  const [first] = await addParts(seed, [2 * MiB]);
  const { cid } = await addStream(stack.kuboApiUrl, range(seed, 2 * MiB, 3 * MiB + 9), { ...ADD, 'raw-leaves': false, 'cid-version': 0 });
  await assembleAndCompare(seed, [first!, { cid, size: MiB + 9 }], false);
});

test('a part whose bytes are not its declared size fails', async () => {
  const [first, second] = await addParts('wrong-size', [2 * MiB, 10]);
  await expect(assembleFile(kubo(), stack.kuboApiUrl, [first!, { ...second!, size: 11 }])).rejects.toThrow(PartSizeError);
  await expect(assembleFile(kubo(), stack.kuboApiUrl, [{ ...first!, size: 3 * MiB }, second!])).rejects.toThrow(PartSizeError);
  // Off the grid, the count of the streamed bytes finds it.
  await expect(assembleFile(kubo(), stack.kuboApiUrl, [{ ...first!, size: 2 * MiB + 1 }, second!])).rejects.toThrow(PartSizeError);
});
