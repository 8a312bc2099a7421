// Upload use-cases: bytes go into Kubo with the unixfs-v1-2025 profile, then the user's file
// record and a hold are written, and the content's sync workflow pins it through IPFS Cluster
// (within a second or so). Kubo does not pin on add: an upload refused after the bytes went
// in (bad fields, quota) leaves nothing pinned, only blocks for Kubo's garbage collector.
import { CID } from 'multiformats/cid';
import { parseCid } from '../../infra/cid.js';
import { UNIXFS_ADD_OPTIONS } from '../../infra/constants.js';
import { addStream, importCarStream, KuboAddError, type Kubo } from '../../infra/kubo.js';
import type { Plan } from '../../infra/plans.js';
import { userContentKey } from '../../infra/db/by-id.js';
import type { User } from '../../infra/db/users.js';
import { InvalidInput, PlanLimitReached } from '../errors.js';
import { holdsChanged, MB, type ContentDeps } from '../content.js';
import { toPublicFile, type PublicFile } from '../files/service.js';

export interface UploadDeps extends ContentDeps {
  kubo: Kubo;
  kuboApiUrl: string;
  gatewayUrl: string;
}

export interface FileFields {
  name?: string;
  description?: string;
  folderId?: string | null;
  metadata?: Record<string, string>;
}

/** Adds bytes to Kubo as one UnixFS file; the source is streamed, never held whole. */
export async function addToKubo(
  deps: { kubo: Kubo; kuboApiUrl: string },
  source: Uint8Array | AsyncIterable<Uint8Array>,
  signal?: AbortSignal,
): Promise<CID> {
  const stream =
    source instanceof Uint8Array
      ? (async function* () {
          yield source;
        })()
      : source;
  // The profile's flags explicitly, and no pin (see the top of this file).
  const hash = await addStream(deps.kuboApiUrl, stream, { ...UNIXFS_ADD_OPTIONS, pin: false }, signal);
  return CID.parse(hash);
}

/** Imports a CAR; its single root becomes the file. Kubo reports roots only when it pins
 * them, so a CAR's root is pinned in Kubo at once (see `dropCarRoot`). */
export async function importCar(deps: { kuboApiUrl: string }, source: AsyncIterable<Uint8Array>, signal?: AbortSignal): Promise<CID> {
  let roots: string[];
  try {
    roots = await importCarStream(deps.kuboApiUrl, source, signal);
  } catch (err) {
    // Kubo answered, so it is up: it could not read the CAR.
    if (err instanceof KuboAddError) throw new InvalidInput(`not a valid CAR file: ${err.message}`, 'INVALID_CAR');
    throw err;
  }
  if (roots.length !== 1) throw new InvalidInput(`a CAR upload needs exactly one root; this one has ${roots.length}`, 'INVALID_CAR');
  return CID.parse(roots[0]!);
}

/** Undoes a CAR import that was refused after the fact, unless someone holds the root. */
export async function dropCarRoot(deps: UploadDeps, root: CID): Promise<void> {
  const cid = parseCid(root.toString());
  if ((await deps.db.holds.of(cid.multihash)).holders.length === 0) await deps.kubo.pin.rm(root).catch(() => undefined);
}

/** Size of a DAG root in Kubo: a file's bytes, or a directory's cumulative size. */
export async function dagSize(kubo: Kubo, cid: CID): Promise<number> {
  const stat = await kubo.files.stat(`/ipfs/${cid.toString()}`);
  return Number(stat.type === 'directory' ? stat.cumulativeSize : stat.size);
}

export function storageLimit(plan: Plan): PlanLimitReached {
  return new PlanLimitReached('STORAGE_LIMIT', `this upload would exceed your plan's storage quota of ${plan.storageMB} MB`);
}

/**
 * Records added content as the user's file and holds it. The quota check and the write are
 * made under the user's storage lock, so concurrent uploads cannot together pass the quota;
 * uploading the same content again updates the record and counts its size once.
 */
export async function recordFile(
  deps: UploadDeps,
  caller: { user: User; plan: Plan },
  added: { cid: CID; size: number; mimeType: string },
  fields: FileFields,
): Promise<PublicFile> {
  const cid = parseCid(added.cid.toString());
  const { user, plan } = caller;
  if (fields.folderId && !(await deps.db.folders.findForUser(user._id, fields.folderId))) {
    throw new InvalidInput(`folder ${fields.folderId} not found`, 'FOLDER_NOT_FOUND');
  }
  const file = await deps.db.locks.withLock(`storage:${user._id}`, async () => {
    const [used, previous] = await Promise.all([deps.db.usage(user._id), deps.db.files.findForUser(user._id, cid.multihash)]);
    if (used - (previous?.size ?? 0) + added.size > plan.storageMB * MB) throw storageLimit(plan);
    const now = Date.now();
    return (
      await deps.db.files.upsert({
        _id: userContentKey(user._id, cid.multihash),
        userId: user._id,
        cid: cid.v1,
        multihash: cid.multihash,
        name: fields.name ?? cid.v1,
        description: fields.description ?? null,
        size: added.size,
        mimeType: added.mimeType,
        folderId: fields.folderId ?? null,
        metadata: fields.metadata ?? {},
        createdAt: now,
        updatedAt: now,
      })
    ).file;
  });
  await holdsChanged(deps, cid, { kind: 'file', key: file._id });
  return toPublicFile(file, deps.gatewayUrl);
}
