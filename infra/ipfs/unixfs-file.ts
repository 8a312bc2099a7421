// One UnixFS file from parts already in Kubo (S3 multipart completion), with exactly the CID
// that `ipfs add` with the unixfs-v1-2025 profile gives for the whole object's bytes at once.
//
// When every part but the last is a whole number of 1 MiB chunks, the parts' raw leaves are
// the whole file's chunks, byte for byte: only the file nodes above them differ. Those are
// rebuilt from the parts' upper blocks (never a leaf is read) as Kubo's balanced builder lays
// them out, so completion costs O(chunks) small requests and no object byte moves again.
// Any other part sizes shift the chunk boundaries: the bytes are streamed through Kubo's add.
//
// The encodings are the libraries' (@ipld/dag-pb, ipfs-unixfs); only the layout is ours, and
// tests/unixfs-file.test.ts compares it with Kubo's add of the whole bytes.
import * as dagPB from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import pLimit, { type LimitFunction } from 'p-limit';
import { CHUNK_BYTES, MAX_FILE_LINKS, UNIXFS_ADD_OPTIONS } from '../constants.js';
import { addStream, type Kubo } from './kubo.js';

/** A part's root CID (as Kubo's add answered it) and its length in bytes. */
export interface PartContent {
  cid: string;
  size: number;
}

/** `dagSize` is the root's cumulative size, as Kubo's add answers `Size`; `reused` says the
 * parts' leaves were linked (no byte read again) rather than the bytes added anew. */
export interface AssembledFile {
  cid: string;
  size: number;
  dagSize: number;
  reused: boolean;
}

/** A link of a file node: the child's file bytes (`blocksizes`) and cumulative size (Tsize). */
interface FileLink {
  cid: CID;
  fileSize: number;
  tsize: number;
}

/** Blocks read from (or written to) Kubo at once: each is a small request. */
const BLOCK_REQUESTS = 16;
/** Parts whose leaves are gathered ahead of the tree being built: bounds memory (a 5 GiB part
 * is 5,120 leaves) whatever the number of parts. */
const PARTS_AHEAD = 32;

const ADD_OPTIONS = { ...UNIXFS_ADD_OPTIONS, pin: false };

/**
 * The parts, in order, as one file in Kubo (not pinned: the caller pins). `size` is the sum of
 * the parts. A part whose bytes are not its declared size fails the completion.
 */
export async function assembleFile(kubo: Kubo, kuboApiUrl: string, parts: PartContent[], signal?: AbortSignal): Promise<AssembledFile> {
  const size = parts.reduce((sum, part) => sum + part.size, 0);
  if (size === 0) {
    // Kubo's own answer for no bytes (with raw leaves: the empty raw block, Size 0).
    const { cid, dagSize } = await addStream(kuboApiUrl, (async function* () {})(), ADD_OPTIONS, signal);
    return { cid, dagSize, size, reused: true };
  }
  const aligned = parts.every((part, i) => i === parts.length - 1 || (part.size > 0 && part.size % CHUNK_BYTES === 0));
  if (aligned) {
    const built = await linkLeaves(kubo, parts, size, signal);
    if (built) return { cid: built.cid.toString(), size, dagSize: built.tsize, reused: true };
  }
  const { cid, dagSize } = await addStream(kuboApiUrl, partBytes(kubo, parts, signal), ADD_OPTIONS, signal);
  return { cid, dagSize, size, reused: false };
}

/** The parts' bytes in order, each streamed from Kubo; a part of another length than declared throws. */
async function* partBytes(kubo: Kubo, parts: PartContent[], signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  for (const part of parts) {
    let length = 0;
    for await (const chunk of kubo.cat(part.cid, { signal })) {
      length += chunk.length;
      yield chunk;
    }
    if (length !== part.size) throw new PartSizeError(part, length);
  }
}

export class PartSizeError extends Error {
  constructor(part: PartContent, actual: number) {
    super(`part ${part.cid} has ${actual} bytes, not ${part.size}`);
    this.name = 'PartSizeError';
  }
}

/**
 * The fast path: the parts' leaves under new file nodes. Undefined when the parts' DAGs are
 * not what the profile makes (another chunker, dag-pb leaves, another hash): the caller then
 * adds the bytes. Blocks already put by then are unpinned and go with Kubo's GC.
 */
async function linkLeaves(kubo: Kubo, parts: PartContent[], size: number, signal?: AbortSignal): Promise<FileLink | undefined> {
  const limit = pLimit(BLOCK_REQUESTS);
  const chunks = Math.ceil(size / CHUNK_BYTES);
  const builder = new BalancedBuilder(treeDepth(chunks), (cid, bytes) =>
    limit(async () => {
      const stored = await kubo.block.put(bytes, { format: 'dag-pb', mhtype: 'sha2-256', pin: false, signal });
      // The block is kept by its multihash, whatever CID version the answer is in.
      if (!equalBytes(stored.multihash.bytes, cid.multihash.bytes)) throw new Error(`kubo stored ${stored} for ${cid}`);
    }),
  );
  let previous: FileLink | undefined;
  let count = 0;
  for await (const leaves of partLeaves(kubo, limit, parts, signal)) {
    if (!leaves) return undefined;
    for (const leaf of leaves) {
      // Every chunk but the very last is full, as the whole object's chunker cuts it.
      if (previous) {
        if (previous.fileSize !== CHUNK_BYTES) return undefined;
        await builder.add(previous);
      }
      previous = leaf;
      count++;
    }
  }
  if (!previous || count !== chunks) return undefined;
  // A single chunk is the file itself: Kubo's add answers the raw leaf.
  if (count === 1) return previous;
  await builder.add(previous);
  return builder.finish();
}

/**
 * The depth of Kubo's balanced tree over `chunks` leaves (more than one): the smallest whose
 * capacity, MAX_FILE_LINKS to the power of the depth, holds them all.
 */
function treeDepth(chunks: number): number {
  let depth = 1;
  for (let capacity = MAX_FILE_LINKS; capacity < chunks; capacity *= MAX_FILE_LINKS) depth++;
  return depth;
}

/**
 * Each part's leaves in order, read PARTS_AHEAD parts ahead; undefined for a part not laid out
 * by the profile. Only the parts' dag-pb blocks are read (and a raw root's size).
 */
async function* partLeaves(
  kubo: Kubo,
  limit: LimitFunction,
  parts: PartContent[],
  signal?: AbortSignal,
): AsyncGenerator<FileLink[] | undefined> {
  const pending: Promise<FileLink[] | undefined>[] = [];
  let next = 0;
  const start = () => {
    const part = parts[next++]!;
    const leaves = partRootLeaves(kubo, limit, part, signal);
    // Awaited in turn below; a failure of one read ahead must not go unhandled meanwhile.
    leaves.catch(() => {});
    pending.push(leaves);
  };
  while (next < parts.length && pending.length < PARTS_AHEAD) start();
  while (pending.length > 0) {
    const leaves = await pending.shift()!;
    if (next < parts.length) start();
    yield leaves;
  }
}

async function partRootLeaves(kubo: Kubo, limit: LimitFunction, part: PartContent, signal?: AbortSignal): Promise<FileLink[] | undefined> {
  const cid = CID.parse(part.cid);
  if (cid.code === raw.code) {
    // A raw root is the whole part; its size is checked (a stat, not the bytes), as a dag-pb
    // root's is by its UnixFS filesize.
    const { size } = await limit(() => kubo.block.stat(cid, { signal }));
    if (size !== part.size) throw new PartSizeError(part, size);
    if (size === 0) return []; // an empty last part adds no chunk
  }
  const leaves = await leavesUnder(kubo, limit, cid, part.size, signal);
  const total = leaves?.reduce((sum, leaf) => sum + leaf.fileSize, 0);
  if (total !== undefined && total !== part.size) throw new PartSizeError(part, total);
  return leaves;
}

/**
 * The raw leaves under a node of `fileSize` bytes: itself if raw; the leaves of its children
 * for a UnixFS file node without inline data (a part over MAX_FILE_LINKS chunks has file nodes
 * under its root: descended, siblings read at once). Undefined for anything else.
 */
async function leavesUnder(
  kubo: Kubo,
  limit: LimitFunction,
  cid: CID,
  fileSize: number,
  signal?: AbortSignal,
): Promise<FileLink[] | undefined> {
  if (cid.version !== 1 || cid.multihash.code !== sha256.code) return undefined;
  if (cid.code === raw.code) return [{ cid, fileSize, tsize: fileSize }];
  if (cid.code !== dagPB.code) return undefined;
  // Only the block is awaited inside the limit: a parent holding a slot while its children
  // wait for one could use up every slot.
  const node = dagPB.decode(await limit(() => kubo.block.get(cid, { signal })));
  let unixfs: UnixFS;
  try {
    unixfs = UnixFS.unmarshal(node.Data ?? new Uint8Array());
  } catch {
    return undefined;
  }
  const sizes = unixfs.blockSizes.map(Number);
  if (unixfs.type !== 'file' || (unixfs.data?.length ?? 0) > 0 || sizes.length !== node.Links.length) return undefined;
  if (Number(unixfs.fileSize()) !== fileSize) return undefined;
  const children = await Promise.all(node.Links.map((link, i) => leavesUnder(kubo, limit, link.Hash, sizes[i]!, signal)));
  if (children.some((leaves) => leaves === undefined)) return undefined;
  return children.flat() as FileLink[];
}

type PutNode = (cid: CID, bytes: Uint8Array) => Promise<void>;

/**
 * Kubo's balanced layout over leaves given in order, for a tree of a known depth: a file node
 * at level k links up to MAX_FILE_LINKS nodes of level k-1 (level 0: the leaves), each full
 * before the next starts. A node is built as soon as it is full, so at most `depth` nodes are
 * open at once. At the end the open ones close upwards: a last subtree keeps its level even
 * with a single child (1025 chunks: a root over a full node and a node of one leaf), as Kubo's
 * builder fills each new child to the depth below.
 */
class BalancedBuilder {
  private readonly open: FileLink[][] = [];
  private readonly puts: Promise<void>[] = [];

  constructor(
    private readonly depth: number,
    private readonly put: PutNode,
  ) {
    for (let level = 0; level < depth; level++) this.open.push([]);
  }

  async add(link: FileLink, level = 0): Promise<void> {
    const links = this.open[level]!;
    links.push(link);
    if (links.length === MAX_FILE_LINKS && level + 1 < this.depth) {
      this.open[level] = [];
      await this.add(await this.node(links), level + 1);
    }
  }

  /** Closes the open nodes, waits for every block to be stored and returns the root. */
  async finish(): Promise<FileLink> {
    for (let level = 0; level + 1 < this.depth; level++) {
      const links = this.open[level]!;
      if (links.length === 0) continue;
      this.open[level] = [];
      await this.add(await this.node(links), level + 1);
    }
    const root = await this.node(this.open[this.depth - 1]!);
    await Promise.all(this.puts);
    return root;
  }

  /** A UnixFS file node over `links`: blocksizes per child, links unnamed (Kubo writes the
   * empty name), Tsize the child's cumulative size. */
  private async node(links: FileLink[]): Promise<FileLink> {
    const data = new UnixFS({ type: 'file', blockSizes: links.map((link) => BigInt(link.fileSize)) });
    const bytes = dagPB.encode({ Data: data.marshal(), Links: links.map((link) => ({ Hash: link.cid, Name: '', Tsize: link.tsize })) });
    const cid = CID.createV1(dagPB.code, await sha256.digest(bytes));
    const put = this.put(cid, bytes);
    // Awaited by finish; a failure must not go unhandled before then.
    put.catch(() => {});
    this.puts.push(put);
    return {
      cid,
      fileSize: Number(data.fileSize()),
      tsize: links.reduce((sum, link) => sum + link.tsize, bytes.length),
    };
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
