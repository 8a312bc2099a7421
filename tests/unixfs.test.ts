// infra/ipfs/unixfs.ts against Kubo: a tree built from CIDs alone has the root CID that
// `ipfs add -r --hidden` (the stack's Kubo, unixfs-v1-2025 profile) gives for the same tree on
// disk, and every block it built is the block Kubo has: plain directories, HAMTs of one and
// several levels, the threshold on both sides, and multi-block files linked by their roots.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as dagPB from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import { binaryPath } from '../stack/binaries.js';
import { buildTree, cumulativeSize, type Block, type TreeFile } from '../infra/ipfs/unixfs.js';
import { kubo, MiB } from './support/content.js';
import { stack, tempDir } from './support/stack.js';

const exec = promisify(execFile);

/** `ipfs add -r --hidden` of a directory, stored (so its blocks can be compared). */
async function addR(dir: string): Promise<CID> {
  const port = new URL(stack.kuboApiUrl).port;
  const { stdout } = await exec(
    binaryPath('kubo', 'ipfs'),
    ['--api', `/ip4/127.0.0.1/tcp/${port}`, 'add', '-r', '--hidden', '--pin=false', '-Q', dir],
    {
      maxBuffer: 1 << 20,
    },
  );
  return CID.parse(stdout.trim()).toV1();
}

/** Writes `files` (path → content) and `dirs` under a new directory; builds the same tree from CIDs. */
async function both(dirs: string[], files: Map<string, Uint8Array>): Promise<{ built: CID; blocks: Block[]; expected: CID }> {
  const disk = tempDir('stupa-unixfs-');
  for (const d of dirs) fs.mkdirSync(path.join(disk, d), { recursive: true });
  const linked: TreeFile[] = [];
  for (const [p, content] of files) {
    fs.mkdirSync(path.dirname(path.join(disk, p)), { recursive: true });
    fs.writeFileSync(path.join(disk, p), content);
    if (content.length <= MiB) {
      // One chunk: a raw leaf, whose CID is the hash of the bytes.
      linked.push({ path: p, cid: CID.createV1(raw.code, await sha256.digest(content)), tsize: content.length });
    } else {
      const added = await kubo().add(content, { cidVersion: 1, rawLeaves: true, pin: false });
      linked.push({ path: p, cid: added.cid, tsize: cumulativeSize(added.cid, await kubo().block.get(added.cid)) });
    }
  }
  const blocks: Block[] = [];
  const root = await buildTree(dirs, linked, (b) => void blocks.push(b));
  const expected = await addR(disk);
  fs.rmSync(disk, { recursive: true, force: true });
  return { built: root.cid, blocks, expected };
}

const text = (s: string) => new TextEncoder().encode(s);

/** Every block built is byte for byte the block Kubo stored under that CID. */
async function sameBlocks(blocks: Block[]): Promise<void> {
  for (const block of blocks) expect(Buffer.from(await kubo().block.get(block.cid))).toEqual(Buffer.from(block.bytes));
}

test('a nested tree with unicode names, empty directories, dotfiles, empty and multi-block files', async () => {
  const dirs = ['a', 'empty', 'ünïcødé 📁', 'a/b', 'a/b/c'];
  const files = new Map<string, Uint8Array>([
    ['index.html', text('<h1>hi</h1>')],
    ['.hidden', text('dot')],
    ['zero', new Uint8Array()],
    ['Z.txt', text('upper case sorts first')],
    ['a/é.txt', text('accent')],
    ['a/e\u0301.txt', text('decomposed accent: another name')],
    ['a/b/c/deep', text('deep')],
    ['big.bin', new Uint8Array(2 * MiB + 17).map((_, i) => (i * 31) % 251)],
  ]);
  const { built, blocks, expected } = await both(dirs, files);
  expect(built.toString()).toBe(expected.toString());
  expect(blocks).toHaveLength(dirs.length + 1);
  await sameBlocks(blocks);
}, 60_000);

test('at the threshold: 262,144 bytes stays a plain directory, one more link makes a HAMT', async () => {
  // Each link: CID 36 + name + size varint, framed; entries sized so n links land on both sides.
  for (const n of [1083, 1084]) {
    const pad = 'p'.repeat(190);
    const files = new Map(
      Array.from({ length: n }, (_, i): [string, Uint8Array] => [`${String(i).padStart(6, '0')}${pad}`, text(`t${n}-${i}`)]),
    );
    const { built, blocks, expected } = await both([], files);
    expect({ n, cid: built.toString() }).toEqual({ n, cid: expected.toString() });
    const root = blocks[blocks.length - 1]!;
    const type = UnixFS.unmarshal(dagPB.decode(root.bytes).Data!).type;
    expect({ n, type, blocks: blocks.length > 1 }).toEqual({
      n,
      type: n === 1083 ? 'directory' : 'hamt-sharded-directory',
      blocks: n === 1084,
    });
    if (n === 1083) expect(root.bytes.length).toBe(262_090);
    await sameBlocks(blocks);
  }
}, 120_000);

test('a HAMT of several levels (10,000 entries of short names) and one nested in a subdirectory', async () => {
  const files = new Map<string, Uint8Array>();
  for (let i = 0; i < 10_000; i++) files.set(`sub/f${i}-${'x'.repeat(20)}`, text(`h${i}`));
  files.set('top.txt', text('top'));
  const { built, blocks, expected } = await both(['sub'], files);
  expect(built.toString()).toBe(expected.toString());
  // Shards under shards: more blocks than slots of one level.
  expect(blocks.length).toBeGreaterThan(257);
  await sameBlocks(blocks);
}, 180_000);
