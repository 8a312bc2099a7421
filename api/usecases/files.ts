// File use-cases: a file is a user's record of content added through the service, and a hold
// on that content.
import type { FileRecord } from '../../infra/db/files.js';
import type { ParsedCid } from '../../infra/cid.js';
import type { UseCaseDeps } from './deps.js';
import { InvalidInput, NotFound } from './errors.js';

export type { FileRecord };
type FileDeps = Pick<UseCaseDeps, 'db'>;

export async function getFile(deps: FileDeps, userId: string, cid: ParsedCid): Promise<FileRecord> {
  const file = await deps.db.files.findForUser(userId, cid.multihash);
  if (!file) throw new NotFound('file');
  return file;
}

export async function renameFile(deps: FileDeps, userId: string, cid: ParsedCid, name: string): Promise<FileRecord> {
  const file = await deps.db.files.update(userId, cid.multihash, { name });
  if (!file) throw new NotFound('file');
  return file;
}

/** Moves a file into one of the caller's folders, or to the top level with `null`. */
export async function moveFile(deps: FileDeps, userId: string, cid: ParsedCid, folderId: string | null): Promise<FileRecord> {
  if (folderId !== null && !(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const file = await deps.db.files.update(userId, cid.multihash, { folderId });
  if (!file) throw new NotFound('file');
  return file;
}

/** An opaque cursor: the position of the last item of a page. */
const encodeCursor = (f: FileRecord) => Buffer.from(JSON.stringify([f.createdAt, f._id])).toString('base64url');

function decodeCursor(cursor: string): { createdAt: number; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof createdAt === 'number' && typeof id === 'string') return { createdAt, id };
  } catch {
    // fall through
  }
  throw new InvalidInput('cursor is not one this API gave out', 'INVALID_CURSOR');
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
  // One more than asked tells whether another page exists.
  const rows = await deps.db.files.list(userId, { ...q, after, limit: q.limit + 1 });
  const items = rows.slice(0, q.limit);
  return { items, nextCursor: rows.length > q.limit ? encodeCursor(items[items.length - 1]!) : null };
}
