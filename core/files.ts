// File use-cases: a file is a user's record of content added through the service (its own id,
// name, folder and metadata), and a hold on that content. The same content may be several
// files of one user; the routes that take a CID act on its one file, or ask for a file id.
import type { FileRecord } from '../infra/db/files.js';
import { looksLikeFileId } from '../infra/db/files.js';
import type { ParsedCid } from '../infra/ipfs/cid.js';
import { FILES_NAMED_IN_CONFLICT } from '../infra/constants.js';
import { fileEvent, recordEvent, wants } from './webhook-events.js';
import { contentLinkBase } from './gateway.js';
import { cidInput, completing, holdsChanged } from './content.js';
import type { UseCaseDeps } from './deps.js';
import { Conflict, InvalidInput, NotFound } from './errors.js';
import { decodeCursor, toPage } from './pages.js';

export type { FileRecord };
type FileDeps = Pick<UseCaseDeps, 'db'>;
type RemoveDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'config'> & Partial<Pick<UseCaseDeps, 'cluster'>>;

/** How a route names a file: by its id, or by a CID that the caller has exactly one file of. */
export type FileRef = { id: string } | { cid: ParsedCid };

export function fileRef(text: string): FileRef {
  if (looksLikeFileId(text)) return { id: text };
  try {
    return { cid: cidInput(text) };
  } catch {
    throw new InvalidInput(`${JSON.stringify(text.slice(0, 100))} is neither a file id (fil_…) nor a CID`, 'INVALID_FILE_REF');
  }
}

/**
 * Keeps folders' fileCount when a file record leaves `from` and enters `to` (undefined or
 * null: no folder), as the record write that moved it reported: each write adjusts by what it
 * changed, so concurrent moves, uploads and deletes of one file count once each.
 */
export async function fileMoved(db: FileDeps['db'], from: string | null | undefined, to: string | null | undefined): Promise<void> {
  if (from === to) return;
  if (from) await db.folders.adjustFileCount(from, -1);
  if (to) await db.folders.adjustFileCount(to, 1);
}

/** The caller's newest file of the content, and how many files of it the caller has. */
export async function getFileByCid(deps: FileDeps, userId: string, cid: ParsedCid): Promise<{ file: FileRecord; filesWithCid: number }> {
  const [file, second] = await deps.db.files.ofContent(userId, cid.multihash, 2);
  if (!file) throw new NotFound('file');
  return { file, filesWithCid: second ? await deps.db.files.countOfContent(userId, cid.multihash) : 1 };
}

/** 409 naming the files of a CID that a route cannot choose between. */
export function severalFiles(cid: ParsedCid, files: FileRecord[]): Conflict {
  const named = files.slice(0, FILES_NAMED_IN_CONFLICT).map((f) => f._id);
  const more = files.length > named.length ? ', …' : '';
  return new Conflict(
    'AMBIGUOUS_CID',
    `you have several files of ${cid.v1} (${named.join(', ')}${more}); name one by its id, e.g. /files/${named[0]}, ` +
      `or list them all with GET /upload/list?cid=${cid.v1}`,
  );
}

/** The caller's files of the content, newest first: all of them when fewer than the 409 names. */
export const filesOfCid = (deps: FileDeps, userId: string, cid: ParsedCid) =>
  deps.db.files.ofContent(userId, cid.multihash, FILES_NAMED_IN_CONFLICT + 1);

/** The file a route names: by id, or the caller's one file of a CID (409 when several). */
export async function findFile(deps: FileDeps, userId: string, ref: FileRef): Promise<FileRecord> {
  if ('id' in ref) {
    const file = await deps.db.files.byId(userId, ref.id);
    if (!file) throw new NotFound('file');
    return file;
  }
  const files = await filesOfCid(deps, userId, ref.cid);
  if (files.length === 0) throw new NotFound('file');
  if (files.length > 1) throw severalFiles(ref.cid, files);
  return files[0]!;
}

async function changeFile(deps: FileDeps, file: FileRecord, changes: { name?: string; folderId?: string | null }) {
  const updated = await deps.db.files.update(file._id, changes);
  if (updated === null) throw new NotFound('file');
  if (updated === false) {
    const twin = await deps.db.files.twin({ ...file, ...changes });
    throw new Conflict(
      'FILE_EXISTS',
      `the same content is a file of that name in that folder already${twin ? ` (${twin._id})` : ''}; delete one of them instead`,
    );
  }
  return updated;
}

export async function renameFile(deps: FileDeps, userId: string, ref: FileRef, name: string): Promise<FileRecord> {
  return (await changeFile(deps, await findFile(deps, userId, ref), { name })).file;
}

/** Moves a file into one of the caller's folders, or to the top level with `null`. */
export async function moveFile(deps: FileDeps, userId: string, ref: FileRef, folderId: string | null): Promise<FileRecord> {
  if (folderId !== null && !(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const file = await findFile(deps, userId, ref);
  // The folders' counts move after the record: logged first, for the sweep (activities/counts.ts).
  await deps.db.holdChanges.append(file.multihash, file.cid, { userId, folders: [file.folderId, folderId] });
  const moved = await changeFile(deps, file, { folderId });
  await completing(() => fileMoved(deps.db, moved.previous.folderId, folderId));
  return moved.file;
}

/**
 * Deletes one file record; the content stays pinned while anything else holds it. What the
 * delete removed releases its hold (infra/db/usage.ts): a file deleted concurrently by two
 * requests is released once, by whichever removed it. The caller announces the hold change
 * (logged here) and has called `usage.ensure` first.
 */
export async function removeFile(deps: Pick<UseCaseDeps, 'db' | 'jobs' | 'config'>, file: FileRecord): Promise<boolean> {
  // Logged before the record goes, with the counters its removal moves (activities/counts.ts):
  // the caller's announcement of the change is `logged`.
  await deps.db.holdChanges.append(file.multihash, file.cid, { userId: file.userId, folders: [file.folderId] });
  const removed = await deps.db.files.delete(file._id);
  if (!removed) return false;
  // The record is gone: what completes its removal is retried through a short MongoDB outage.
  const released = await completing(() => deps.db.usage.release(removed.userId, removed.multihash, 'file'));
  await completing(() => fileMoved(deps.db, removed.folderId, null));
  await deps.db.analytics.tryRecord(removed.userId, Date.now(), { deletes: 1, storedBytes: released.used });
  const user = await deps.db.users.get(removed.userId);
  if (wants(user, 'file.deleted'))
    await recordEvent(deps, removed.userId, fileEvent('file.deleted', removed, await contentLinkBase(deps, user!)));
  return true;
}

/** DELETE /files/:ref: one file goes; the content leaves Cluster once nothing holds it. */
export async function deleteFile(deps: RemoveDeps, userId: string, ref: FileRef): Promise<FileRecord> {
  const file = await findFile(deps, userId, ref);
  await deps.db.usage.ensure(userId); // before any record changes (infra/db/usage.ts)
  if (!(await removeFile(deps, file))) throw new NotFound('file');
  await completing(() => holdsChanged(deps, cidInput(file.cid), undefined, { logged: true }));
  return file;
}

export interface FileListQuery {
  /** `null`: files outside any folder. */
  folderId?: string | null;
  /** Only the files of this content. */
  cid?: ParsedCid;
  name?: string;
  mimeType?: string;
  from?: number;
  to?: number;
  cursor?: string;
  limit: number;
}

/** The user's files, newest first, a page at a time. */
export async function listFiles(
  deps: FileDeps,
  userId: string,
  q: FileListQuery,
): Promise<{ items: FileRecord[]; nextCursor: string | null }> {
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.files.list(userId, {
    ...q,
    multihash: q.cid?.multihash,
    after: after && { createdAt: after.at, id: after.id },
    limit: q.limit + 1,
  });
  return toPage(rows, q.limit, (f) => ({ at: f.createdAt, id: f._id }));
}
