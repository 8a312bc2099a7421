// Records for `npm run bench -- --scale`: file records, pin requests and folders shaped as the
// service writes them (infra/db/files.ts, pins.ts, folders.ts), made from a counter so that
// any one of them can be made again without keeping the others: the benchmark knows which
// record is the 10,000th newest of a user without reading the database.
//
// Record i of a kind (files, pins) is user `owner(i)`'s: even i the big user's (half of each
// kind), odd i spread over the other users in turn. Its content is a CIDv1 raw leaf whose
// sha256 digest is that of `<seed>:<kind>:<i>`; its createdAt grows with i, spread over the
// year before the run, one apart at least, so "newest first" is "highest i first".
import crypto from 'node:crypto';
import { base32 } from 'multiformats/bases/base32';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import * as Digest from 'multiformats/hashes/digest';
import { sha256 } from 'multiformats/hashes/sha2';
import { parseCid } from '../../infra/ipfs/cid.js';
import { userContentKey } from '../../infra/db/by-id.js';
import type { FileRecord } from '../../infra/db/files.js';
import type { FolderRecord } from '../../infra/db/folders.js';
import type { PinRecord, PinStatus } from '../../infra/db/pins.js';
import { randomBase62 } from '../../infra/secrets.js';

export type Kind = 'files' | 'pins';

const YEAR_MS = 365 * 24 * 3600 * 1000;
/** Folders per user; about 3 files in 10 are in one of them. */
export const FOLDERS_PER_USER = 4;
const MIME_TYPES = ['image/jpeg', 'image/png', 'application/json', 'text/plain', 'application/pdf', 'video/mp4'];
const EXTENSIONS = ['jpg', 'png', 'json', 'txt', 'pdf', 'mp4'];
/** A dialable-looking origin for the pin requests that name one (never dialled here). */
const ORIGIN = '/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA';

export interface ScaleData {
  seed: string;
  counts: Record<Kind, number>;
  /** users[0] is the big user, who holds half of each kind. */
  users: string[];
  /** The user's folder IDs. */
  folders: Map<string, string[]>;
  /** createdAt of record 0 of each kind; the last is at most `end`. */
  start: number;
  end: number;
}

export function planData(counts: Record<Kind, number>, users: string[], end: number): ScaleData {
  if (users.length < 2) throw new Error('the scale data needs at least two users (one holds half of each kind)');
  const seed = crypto.randomBytes(6).toString('hex');
  const folders = new Map(users.map((u) => [u, Array.from({ length: FOLDERS_PER_USER }, (_, n) => `fld_${seed}${n}${randomBase62(8)}`)]));
  return { seed, counts, users, folders, start: end - YEAR_MS, end };
}

export const owner = (d: ScaleData, i: number): string => (i % 2 === 0 ? d.users[0]! : d.users[1 + ((i >> 1) % (d.users.length - 1))]!);

export function createdAt(d: ScaleData, kind: Kind, i: number): number {
  return d.start + Math.floor((i * (d.end - d.start)) / Math.max(1, d.counts[kind]));
}

/** How many records of the kind are the big user's. */
export const bigUserCount = (d: ScaleData, kind: Kind): number => Math.ceil(d.counts[kind] / 2);

/** Index of the big user's `rank`-th newest record of the kind (1 = the newest). */
export function bigUserNewest(d: ScaleData, kind: Kind, rank: number): number {
  const last = d.counts[kind] - 1;
  return (last % 2 === 0 ? last : last - 1) - 2 * (rank - 1);
}

interface Content {
  cid: string;
  multihash: string;
  /** The digest's bytes: a deterministic source of "random" choices for the record. */
  bytes: Uint8Array;
}

export function content(d: ScaleData, kind: Kind, i: number): Content {
  const hash = crypto.createHash('sha256').update(`${d.seed}:${kind}:${i}`).digest();
  const digest = Digest.create(sha256.code, hash);
  const cid = CID.createV1(raw.code, digest);
  return { cid: cid.toString(base32), multihash: base32.baseEncode(digest.bytes), bytes: hash };
}

/** 128 B to about 4 MiB, most of them small, as a pinning service's content is. */
const sizeOf = (b: Uint8Array, at: number) => 2 ** (7 + (b[at]! % 16)) + b[at + 1]!;

/** The i-th file's id: deterministic, as the rest of the data (base 36 is within base 62). */
const fileId = (i: number) => `fil_${i.toString(36).padStart(16, '0')}`;

export function fileRecord(d: ScaleData, i: number): FileRecord {
  const userId = owner(d, i);
  const c = content(d, 'files', i);
  const b = c.bytes;
  const at = createdAt(d, 'files', i);
  const type = b[2]! % MIME_TYPES.length;
  return {
    _id: fileId(i),
    userId,
    cid: c.cid,
    multihash: c.multihash,
    name: b[3]! % 8 === 0 ? c.cid : `file-${i}.${EXTENSIONS[type]}`,
    description: b[4]! % 10 === 0 ? `bench file ${i}` : null,
    size: sizeOf(b, 5),
    mimeType: MIME_TYPES[type]!,
    folderId: b[7]! % 10 < 3 ? d.folders.get(userId)![b[8]! % FOLDERS_PER_USER]! : null,
    metadata: b[9]! % 4 === 0 ? { project: `p${b[10]! % 16}`, batch: String(i >> 10) } : {},
    createdAt: at,
    updatedAt: b[11]! % 10 === 0 ? at + 60_000 : at,
  };
}

export function pinRecord(d: ScaleData, i: number): PinRecord {
  const userId = owner(d, i);
  const c = content(d, 'pins', i);
  const b = c.bytes;
  const at = createdAt(d, 'pins', i);
  // 90% pinned, 5% queued, 5% failed.
  const status: PinStatus = b[2]! < 230 ? 'pinned' : b[2]! < 243 ? 'queued' : 'failed';
  const pinnedAt = status === 'pinned' ? at + 500 + b[3]! * 40 : null;
  return {
    _id: userContentKey(userId, c.multihash),
    requestId: `pin_${randomBase62(20)}`,
    userId,
    cid: c.cid,
    multihash: c.multihash,
    name: b[4]! % 3 === 0 ? null : `pin-${i}`,
    description: null,
    origins: b[5]! % 5 === 0 ? [ORIGIN] : [],
    metadata: b[6]! % 4 === 0 ? { source: `s${b[7]! % 8}` } : {},
    status,
    error:
      status === 'failed' ? { reason: 'TIMEOUT', details: 'the content was not fetched in time (last cluster status: pinning)' } : null,
    size: status === 'pinned' ? sizeOf(b, 8) : null,
    createdAt: at,
    updatedAt: pinnedAt ?? at,
    pinnedAt,
    deadline: at + 24 * 3600 * 1000,
  };
}

export function folderRecords(d: ScaleData): FolderRecord[] {
  return [...d.folders].flatMap(([userId, ids]) =>
    ids.map((id, n) => ({ _id: id, userId, name: `folder ${n}`, parentFolderId: null, createdAt: d.start, updatedAt: d.start })),
  );
}

/** Throws unless the record's CID and multihash are what infra/ipfs/cid.ts makes of its CID. */
export function assertCidShape(record: { cid: string; multihash: string }): void {
  const parsed = parseCid(record.cid);
  if (parsed.v1 !== record.cid || parsed.multihash !== record.multihash) {
    throw new Error(`generated CID ${record.cid} / ${record.multihash} is not as infra/ipfs/cid.ts parses it`);
  }
}
