// File use-cases: a file is a user's record of content added through the service, and a hold
// on that content.
import type { FileRecord } from '../../infra/db/files.js';
import type { ParsedCid } from '../../infra/cid.js';
import type { UseCaseDeps } from './deps.js';
import { NotFound } from './errors.js';
import { fileMoved } from './folders.js';
import { decodeCursor, toPage } from './pages.js';

export type { FileRecord };
type FileDeps = Pick<UseCaseDeps, 'db'>;

export async function getFile(deps: FileDeps, userId: string, cid: ParsedCid): Promise<FileRecord> {
  const file = await deps.db.files.findForUser(userId, cid.multihash);
  if (!file) throw new NotFound('file');
  return file;
}

export async function renameFile(deps: FileDeps, userId: string, cid: ParsedCid, name: string): Promise<FileRecord> {
  const updated = await deps.db.files.update(userId, cid.multihash, { name });
  if (!updated) throw new NotFound('file');
  return updated.file;
}

/** Moves a file into one of the caller's folders, or to the top level with `null`. */
export async function moveFile(deps: FileDeps, userId: string, cid: ParsedCid, folderId: string | null): Promise<FileRecord> {
  if (folderId !== null && !(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const moved = await deps.db.files.update(userId, cid.multihash, { folderId });
  if (!moved) throw new NotFound('file');
  await fileMoved(deps.db, moved.previous.folderId, folderId);
  return moved.file;
}

export interface FileListQuery {
  /** `null`: files outside any folder. */
  folderId?: string | null;
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
  const rows = await deps.db.files.list(userId, { ...q, after: after && { createdAt: after.at, id: after.id }, limit: q.limit + 1 });
  return toPage(rows, q.limit, (f) => ({ at: f.createdAt, id: f._id }));
}
