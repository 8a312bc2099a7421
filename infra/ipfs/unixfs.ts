// UnixFS directories built from existing CIDs, block for block as Kubo with the
// unixfs-v1-2025 profile builds them for `ipfs add -r`: dag-pb nodes, CIDv1, sha2-256, links
// ordered by the raw UTF-8 bytes of their names, and a HAMT (fanout 256, murmur3-x64-64)
// once the plain directory block would be larger than 262,144 bytes.
//
// Written here rather than with ipfs-unixfs-importer: the importer builds directories only
// from the files' bytes it imports, and a snapshot must link CIDs that exist without reading
// them. The encodings are the libraries' (@ipld/dag-pb, ipfs-unixfs, @multiformats/murmur3);
// only the layout is ours, and tests/snapshots.test.ts compares it with `ipfs add -r`.
import * as dagPB from '@ipld/dag-pb';
import { murmur364 } from '@multiformats/murmur3';
import { UnixFS } from 'ipfs-unixfs';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { HAMT_FANOUT, HAMT_THRESHOLD_BYTES } from '../constants.js';

/** A link as a directory holds it: `tsize` is the cumulative size of the linked DAG. */
export interface DirEntry {
  name: string;
  cid: CID;
  tsize: number;
}

export interface Block {
  cid: CID;
  bytes: Uint8Array;
}

/** Receives each block built, children before their parents. */
export type PutBlock = (block: Block) => void | Promise<void>;

/** murmur3-x64-64, as the UnixFS HAMT spec names its hash function. */
const MURMUR3_X64_64 = 0x22n;
/** Hex digits of a slot index in a shard's link names ("0A", "FF" for fanout 256). */
const PREFIX_DIGITS = (HAMT_FANOUT - 1).toString(16).length;
const utf8 = new TextEncoder();

/**
 * The cumulative size of a DAG from its root block, as Kubo computes a link's Tsize: a raw
 * block's length; a dag-pb node's length plus the Tsize of each of its links (so only the root
 * is read); for other codecs, the block's length.
 */
export function cumulativeSize(cid: CID, bytes: Uint8Array): number {
  if (cid.code !== dagPB.code) return bytes.length;
  return dagPB.decode(bytes).Links.reduce((sum, link) => sum + (link.Tsize ?? 0), bytes.length);
}

async function store(node: dagPB.PBNode, put: PutBlock, encoded?: Uint8Array): Promise<{ cid: CID; tsize: number }> {
  const bytes = encoded ?? dagPB.encode(node);
  const cid = CID.createV1(dagPB.code, await sha256.digest(bytes));
  await put({ cid, bytes });
  return { cid, tsize: node.Links.reduce((sum, link) => sum + (link.Tsize ?? 0), bytes.length) };
}

/** One directory of `entries` (names unique): a plain node, or a HAMT when that is too large. */
export async function buildDirectory(entries: DirEntry[], put: PutBlock): Promise<{ cid: CID; tsize: number }> {
  // Sorted here, each name encoded once: dagPB.prepare would encode both names of every
  // comparison (a third of the build's time at 10,000 links).
  const links = entries
    .map((e) => ({ key: Buffer.from(e.name), link: { Name: e.name, Hash: e.cid, Tsize: e.tsize } }))
    .sort((a, b) => Buffer.compare(a.key, b.key))
    .map((e) => e.link);
  const plain = { Data: new UnixFS({ type: 'directory' }).marshal(), Links: links };
  const bytes = dagPB.encode(plain);
  // Kubo's estimate of the plain block (4 bytes plus name, CID and size per link) equals its
  // real length, so the length itself decides; strictly greater switches.
  if (bytes.length <= HAMT_THRESHOLD_BYTES) return store(plain, put, bytes);
  const hashed = await Promise.all(
    entries.map(async (entry) => ({ entry, hash: (await murmur364.digest(utf8.encode(entry.name))).digest })),
  );
  return shard(hashed, 0, put);
}

/**
 * One HAMT node at `depth`: byte `depth` of an entry's hash picks its slot; a slot of one entry
 * links it under "<slot hex><name>", a slot of several links a child shard under "<slot hex>".
 * Entries are only ever added, so this is the shape Kubo reaches whatever the order of adds.
 */
async function shard(entries: { entry: DirEntry; hash: Uint8Array }[], depth: number, put: PutBlock): Promise<{ cid: CID; tsize: number }> {
  const slots = new Map<number, typeof entries>();
  for (const item of entries) {
    // Two names with the same 64-bit hash: Kubo cannot shard them either.
    if (depth >= item.hash.length) throw new Error(`HAMT: hash collision on "${item.entry.name}"`);
    const slot = item.hash[depth]!;
    slots.set(slot, [...(slots.get(slot) ?? []), item]);
  }
  // The occupied slots as a big-endian bit field (bit i is slot i), without leading zero bytes.
  const bitfield = new Uint8Array(HAMT_FANOUT / 8);
  const links: dagPB.PBLink[] = [];
  for (const slot of [...slots.keys()].sort((a, b) => a - b)) {
    bitfield[bitfield.length - 1 - (slot >> 3)]! |= 1 << (slot & 7);
    const prefix = slot.toString(16).toUpperCase().padStart(PREFIX_DIGITS, '0');
    const group = slots.get(slot)!;
    if (group.length === 1) {
      const { name, cid, tsize } = group[0]!.entry;
      links.push({ Name: prefix + name, Hash: cid, Tsize: tsize });
    } else {
      const child = await shard(group, depth + 1, put);
      links.push({ Name: prefix, Hash: child.cid, Tsize: child.tsize });
    }
  }
  const first = bitfield.findIndex((b) => b !== 0);
  const data = new UnixFS({
    type: 'hamt-sharded-directory',
    data: bitfield.subarray(first),
    hashType: MURMUR3_X64_64,
    fanout: BigInt(HAMT_FANOUT),
  }).marshal();
  return store({ Data: data, Links: links }, put);
}

/** A file of a tree: its path (segments joined by `/`), CID and cumulative DAG size. */
export interface TreeFile {
  path: string;
  cid: CID;
  tsize: number;
}

/**
 * A tree of directories: `dirs` are paths, every parent listed before its children (empty
 * ones kept), `files` sit in them or at the top. Returns the root directory.
 */
export async function buildTree(dirs: string[], files: TreeFile[], put: PutBlock): Promise<{ cid: CID; tsize: number }> {
  const parentOf = (p: string) => p.slice(0, Math.max(0, p.lastIndexOf('/')));
  const baseName = (p: string) => p.slice(p.lastIndexOf('/') + 1);
  const entries = new Map<string, DirEntry[]>([['', []], ...dirs.map((d): [string, DirEntry[]] => [d, []])]);
  for (const file of files) {
    const dir = entries.get(parentOf(file.path));
    if (!dir) throw new Error(`buildTree: no directory for ${file.path}`);
    dir.push({ name: baseName(file.path), cid: file.cid, tsize: file.tsize });
  }
  // Children before parents: the reverse of the listing.
  for (const dir of [...dirs].reverse()) {
    const built = await buildDirectory(entries.get(dir)!, put);
    entries.get(parentOf(dir))!.push({ name: baseName(dir), ...built });
  }
  return buildDirectory(entries.get('')!, put);
}
