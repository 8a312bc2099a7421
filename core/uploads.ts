// Upload use-cases: one owns an upload from its first byte to its file record. Bytes stream
// into Kubo with the unixfs-v1-2025 profile (or as a CAR), counted against the quota as they
// come; then the user's file record and its hold are written, and the content is pinned in
// IPFS Cluster before the answer (inline, core/hold-sync.ts: no workflow round trip for each
// of many small files; the change log makes the pin durable). Kubo does not pin on add: an upload
// refused after the bytes went in (bad fields, quota) leaves nothing pinned, only blocks for
// Kubo's garbage collector. A CAR's root is the exception (Kubo pins it to report it), so a
// refused CAR upload unpins its root again unless somebody holds it.
import { Readable, Transform } from 'node:stream';
import { CID } from 'multiformats/cid';
import { parseCid } from '../infra/ipfs/cid.js';
import { SNIFF_BYTES, UNIXFS_ADD_OPTIONS } from '../infra/constants.js';
import { newFileId, type FileRecord } from '../infra/db/files.js';
import { addStream, contentSizes, importCarStream, KuboError } from '../infra/ipfs/kubo.js';
import { fileEvent, recordEvent, wants } from './webhook-events.js';
import {
  assertStorageFits,
  completing,
  giveBack,
  holdsChanged,
  MB,
  quotaEvents,
  reserveHolding,
  storageFull,
  storageLeft,
} from './content.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { InvalidInput, LimitReached, StupaError, TooLarge, Unavailable, UnsupportedContent } from './errors.js';
import { contentLinkBase } from './gateway.js';
import { fileMoved } from './files.js';
import { checkContentType, grantFolder, type UploadGrant } from './signed-tokens.js';

type UploadDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'kubo' | 'config'> & Partial<Pick<UseCaseDeps, 'cluster'>>;

/** What the caller says about the file, beside its bytes. */
export interface FileDetails {
  name?: string;
  description?: string;
  folderId?: string | null;
  metadata?: Record<string, string>;
  mimeType: string;
}

export interface AddedContent {
  cid: CID;
  /** Bytes received. */
  bytes: number;
  /** The cumulative size of the file's blocks (Kubo's answer to an add); a CAR's is read at record. */
  dagSize: number | null;
  car: boolean;
}

/**
 * A source that runs on past the file in a multipart form's framing: the file ends at the
 * form's delimiter, which Kubo finds (a surface need not scan the bytes for it).
 */
export interface Framing {
  boundary: string;
  /** The source's length in bytes, when known before its first byte. */
  length?: number;
  /** At most how many of the source's bytes are not the file's (more fail the upload). */
  trailerAtMost: number;
  /** Once the source ended: how many of its last bytes were not the file's, in how many parts. */
  trailer(): { bytes: number; parts: number };
}

export interface AddOptions {
  car?: boolean;
  signal?: AbortSignal;
  /** The type the client gave the file (checked against a signed token's allowed types). */
  mimeType?: string;
  /** Only with a stream, not a CAR, and when the upload `takesFraming`. */
  framing?: Framing;
}

export interface Upload {
  /** Whether `add` takes a framed source: not under a signed token that limits the size or type. */
  readonly takesFraming: boolean;
  /** Streams the content into Kubo, as one UnixFS file or (`car`) a CAR with a single root. */
  add(source: Readable | Uint8Array, options?: AddOptions): Promise<AddedContent>;
  /**
   * Records the added content as the caller's file and holds it. `describe` gives the details
   * (a surface may validate them only now, e.g. form fields that came after the file); if it
   * or anything else here throws, a CAR import is undone.
   */
  record(added: AddedContent, describe: () => FileDetails): Promise<FileRecord>;
}

/** Kubo unreachable or failing mid-add is Unavailable; the service's own errors pass. */
function kuboFailure(err: unknown): Error {
  return err instanceof StupaError ? err : new Unavailable('kubo');
}

const tooLarge = (max: number) => new TooLarge('FILE_TOO_LARGE', `this upload token accepts files of at most ${max} bytes`);

/**
 * Begins an upload: refused at once when the account is full, or when `declaredBytes` (a body
 * length with some framing around the file, when the surface knows it) is far over what is left
 * or over a signed token's `maxFileSize`. With a `grant` (a signed upload token's rules) the
 * bytes are also cut off past its size and their type checked before Kubo sees them.
 */
export async function beginUpload(
  deps: UploadDeps,
  caller: Caller,
  options: { declaredBytes?: number; grant?: UploadGrant } = {},
): Promise<Upload> {
  const { user, plan } = caller;
  const { grant } = options;
  const framed = Math.max(1, (options.declaredBytes ?? 0) - MB);
  if (grant?.maxFileSize != null && framed > grant.maxFileSize) throw tooLarge(grant.maxFileSize);
  let room = await storageLeft(deps.db, user._id, plan);
  if (framed > room.left && !room.fresh) room = await storageLeft(deps.db, user._id, plan, { fresh: true });
  assertStorageFits(plan, plan.storageMB * MB - room.left, framed);
  const maxFile = grant?.maxFileSize ?? Infinity;

  const allowed = grant?.allowedMimeTypes;
  return {
    // A token's size limit cuts a stream off at its exact byte, which a trailer's slack would
    // delay by up to 256 KiB; a type check reads the file's first bytes alone.
    takesFraming: !allowed && maxFile === Infinity,

    async add(source, { car = false, signal, mimeType = 'application/octet-stream', framing } = {}) {
      if (car && allowed) throw new UnsupportedContent('MIME_TYPE_NOT_ALLOWED', 'this upload token takes files of given types, not CARs');
      if (framing && (car || allowed || maxFile !== Infinity || source instanceof Uint8Array))
        throw new Error('a framed source is a stream of a file, unchecked');
      let bytes = 0;
      let refused: Error | undefined;
      // What is left cuts the bytes off below: from an older reading only when the bytes are
      // known to fit in it (in memory, or a body length that bounds them), since a reading from
      // before a delete could cut off an upload that fits now.
      const known = source instanceof Uint8Array ? source.length : options.declaredBytes;
      if (!room.fresh && !(known !== undefined && known <= room.left)) room = await storageLeft(deps.db, user._id, plan, { fresh: true });
      const { left } = room;
      const refusal = (n: number) => (n > maxFile ? tooLarge(maxFile) : n > left ? storageFull(plan) : undefined);
      // While a framed source flows, its trailer may be among the bytes counted.
      const slack = framing?.trailerAtMost ?? 0;
      let body: Readable | Uint8Array[];
      if (source instanceof Uint8Array) {
        // Already in memory (a JSON upload's content): checked whole, before Kubo sees a byte,
        // and sent as one buffer (infra/ipfs/kubo.ts postStream), with no stream, listener or sniffer.
        bytes = source.length;
        refused = refusal(bytes);
        if (refused) throw refused;
        if (allowed) await checkContentType(allowed, mimeType, source);
        body = [source];
      } else {
        // The bytes are counted as they flow to Kubo by a listener beside the pipe rather than a
        // stream in between (a stream costs every chunk of a GiB a few calls). Paused, so that
        // nothing flows before Kubo's request (or the sniffing stream) takes it.
        source.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (refused) return;
          refused = refusal(bytes - slack);
          if (refused) source.destroy(refused);
        });
        source.pause();
        body = source;
        if (allowed) {
          // With allowed types, the first SNIFF_BYTES are held back until their type is checked.
          let head: Buffer[] | undefined = [];
          let headBytes = 0;
          const release = (stream: Transform, done: (err?: Error | null) => void) => {
            const bytesSoFar = Buffer.concat(head!);
            head = undefined;
            checkContentType(allowed, mimeType, bytesSoFar).then(
              () => {
                stream.push(bytesSoFar);
                done();
              },
              (err: Error) => done((refused = err)),
            );
          };
          // A Transform rather than an async generator: streams pass chunks on without a promise each.
          const sniffed = new Transform({
            transform(chunk: Buffer, _encoding, done) {
              if (!head) return done(null, chunk);
              head.push(chunk);
              headBytes += chunk.length;
              if (headBytes >= SNIFF_BYTES) release(this, done);
              else done();
            },
            flush(done) {
              if (head) release(this, done);
              else done();
            },
          });
          source.on('error', (err) => sniffed.destroy(err));
          body = source.pipe(sniffed);
        }
      }
      try {
        if (car) return { cid: await importCar(deps, body, signal), bytes, dagSize: null, car };
        const added = await addFile(deps, body, signal, framing);
        if (framing) {
          // Kubo added the form's parts after the file as entries of their own: as many as
          // were read from the body's end, or the trailer was longer than what was read (or
          // had a part Kubo skips: measured, a header line that is folded or has a blank before
          // its colon, which the API's reader accepts).
          const trailer = framing.trailer();
          if (added.entries !== 1 + trailer.parts)
            throw new InvalidInput('the parts after the file are malformed or too long', 'INVALID_MULTIPART');
          bytes -= trailer.bytes;
          refused = refusal(bytes);
          if (refused) throw refused;
        }
        return { cid: added.cid, dagSize: added.dagSize, bytes, car };
      } catch (err) {
        // Kubo reports the aborted body as its own error; the refusal is the real cause.
        throw refused ?? kuboFailure(err);
      }
    },

    async record(added, describe) {
      try {
        const details = describe();
        if (grant) details.folderId = grantFolder(grant, details.folderId);
        const sizes = added.car ? await carSizes(deps, added.cid) : { size: added.bytes, dagSize: added.dagSize };
        return await recordFile(deps, caller, { cid: added.cid, ...sizes }, details);
      } catch (err) {
        if (added.car) await dropCarRoot(deps, added.cid);
        throw err;
      }
    },
  };
}

async function addFile(
  deps: UploadDeps,
  source: Readable | Uint8Array[],
  signal?: AbortSignal,
  framing?: Framing,
): Promise<{ cid: CID; dagSize: number; entries: number }> {
  // The profile's flags explicitly, and no pin (see the top of this file).
  const added = await addStream(deps.config.kubo.apiUrl, source, { ...UNIXFS_ADD_OPTIONS, pin: false }, signal, framing);
  return { cid: CID.parse(added.cid), dagSize: added.dagSize, entries: added.entries };
}

/** Imports a CAR; its single root becomes the file. Kubo reports roots only when it pins them. */
async function importCar(deps: UploadDeps, source: Readable | Uint8Array[], signal?: AbortSignal): Promise<CID> {
  let roots: string[];
  try {
    roots = await importCarStream(deps.config.kubo.apiUrl, source, signal);
  } catch (err) {
    // Kubo answered, so it is up: it could not read the CAR.
    if (err instanceof KuboError) throw new InvalidInput(`not a valid CAR file: ${err.message}`, 'INVALID_CAR');
    throw err;
  }
  if (roots.length !== 1) throw new InvalidInput(`a CAR upload needs exactly one root; this one has ${roots.length}`, 'INVALID_CAR');
  return CID.parse(roots[0]!);
}

/** A CAR's content size, as Kubo has it (what the file counts against the quota), and its DAG size. */
async function carSizes(deps: UploadDeps, root: CID): Promise<{ size: number; dagSize: number }> {
  try {
    return await contentSizes(deps.config.kubo.apiUrl, root.toString());
  } catch (err) {
    throw kuboFailure(err);
  }
}

/** Undoes a CAR import that was refused after the fact, unless someone holds the root. */
async function dropCarRoot(deps: UploadDeps, root: CID): Promise<void> {
  const cid = parseCid(root.toString());
  if ((await deps.db.holds.of(cid.multihash)).holders.length === 0) await deps.kubo.pin.rm(root).catch(() => undefined);
}

/**
 * Records added content as a new file of the user and holds it. What it adds to the user's distinct
 * storage (nothing if the user holds the content already, as a file or a pin) is reserved against
 * the quota first, in one atomic update of the user's counter (infra/db/usage.ts), so concurrent
 * uploads cannot together pass the quota and none waits for another. The reservation is then
 * settled by what happened: a new record is a new file hold, counted by what its holding update
 * actually changed; the same upload again (the same content, name and folder: the same file,
 * infra/db/files.ts) holds nothing new.
 */
async function recordFile(
  deps: UploadDeps,
  caller: Caller,
  added: { cid: CID; size: number; dagSize: number | null },
  details: FileDetails,
): Promise<FileRecord> {
  const cid = parseCid(added.cid.toString());
  const { user, plan } = caller;
  if (details.folderId && !(await deps.db.folders.findForUser(user._id, details.folderId))) {
    throw new InvalidInput(`folder ${details.folderId} not found`, 'FOLDER_NOT_FOUND');
  }
  // Logged before the reservation and the record, as every hold's change is (core/hold-sync.ts),
  // with the counters it moves: an API process killed right after the insert leaves a change the
  // sweep pins and counts (activities/counts.ts), one killed between the reservation and the
  // insert a change naming the process (`by`, infra/db/processes.ts; both found by npm run chaos).
  await deps.db.holdChanges.append(cid.multihash, cid.v1, { userId: user._id, folders: [details.folderId] });
  const reserved = await reserveHolding(deps.db, user._id, plan, cid, 'file', added.size).catch(async (err: unknown) => {
    if (err instanceof LimitReached) await quotaEvents(deps, user._id, plan, plan.storageMB * MB, 0, true);
    throw err;
  });
  const now = Date.now();
  let written: { file: FileRecord; created: boolean };
  try {
    written = await deps.db.files.insert({
      _id: newFileId(),
      userId: user._id,
      cid: cid.v1,
      multihash: cid.multihash,
      name: details.name ?? cid.v1,
      description: details.description ?? null,
      size: added.size,
      dagSize: added.dagSize,
      mimeType: details.mimeType,
      folderId: details.folderId ?? null,
      metadata: details.metadata ?? {},
      createdAt: now,
      updatedAt: now,
    });
  } catch (err) {
    // Nothing was recorded: the reservation goes back. The write's own failure is what the
    // caller hears.
    await giveBack(deps.db, user._id, cid, reserved);
    throw err;
  }
  // The record is written: what completes it is retried through a short MongoDB outage.
  let stored = 0;
  // Not completing(): an increment sent again after its answer was lost could apply twice.
  if (!written.created) await giveBack(deps.db, user._id, cid, reserved);
  else stored = (await completing(() => deps.db.usage.hold(user._id, cid.multihash, 'file', added.size, reserved))).used;
  await deps.db.analytics.tryRecord(user._id, now, {
    uploads: 1,
    uploadBytes: added.size,
    mimeType: details.mimeType,
    storedBytes: stored,
  });
  if (written.created) await completing(() => fileMoved(deps.db, null, written.file.folderId));
  await completing(() => holdsChanged(deps, cid, { kind: 'file', key: written.file._id, userId: user._id }, { logged: true }));
  if (written.created) {
    if (wants(user, 'upload.created'))
      await recordEvent(deps, user._id, fileEvent('upload.created', written.file, await contentLinkBase(deps, user)));
    // The account's storage after this upload: after its reservation, settled by what it stored.
    await quotaEvents(deps, user._id, plan, reserved.usedAfter + stored - reserved.used, stored);
  }
  return written.file;
}
