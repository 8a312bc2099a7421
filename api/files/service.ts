// File use-cases: a file is a user's record of content added through the service, and a
// hold on that content (`file:<fileId>`).
import type { FileRecord } from '../../infra/db/files.js';
import type { ParsedCid } from '../../infra/cid.js';
import type { Database } from '../../infra/db/index.js';
import { InvalidInput, NotFound } from '../errors.js';
import { MB } from '../content.js';

export interface FileDeps {
  db: Database;
  gatewayUrl: string;
}

export const toPublicFile = (f: FileRecord, gatewayUrl: string) => ({
  cid: f.cid,
  name: f.name,
  description: f.description,
  size: f.size,
  sizeMB: Math.round((f.size / MB) * 1e6) / 1e6,
  mimeType: f.mimeType,
  folderId: f.folderId,
  metadata: f.metadata,
  createdAt: f.createdAt,
  updatedAt: f.updatedAt,
  uris: { ipfs: `ipfs://${f.cid}`, gateway: `${gatewayUrl}/ipfs/${f.cid}` },
});
export type PublicFile = ReturnType<typeof toPublicFile>;

export async function getFile(deps: FileDeps, userId: string, cid: ParsedCid): Promise<PublicFile> {
  const file = await deps.db.files.findForUser(userId, cid.multihash);
  if (!file) throw new NotFound('file');
  return toPublicFile(file, deps.gatewayUrl);
}

export async function renameFile(deps: FileDeps, userId: string, cid: ParsedCid, name: string): Promise<PublicFile> {
  const file = await deps.db.files.update(userId, cid.multihash, { name });
  if (!file) throw new NotFound('file');
  return toPublicFile(file, deps.gatewayUrl);
}

/** Moves a file into one of the caller's folders, or to the top level with `null`. */
export async function moveFile(deps: FileDeps, userId: string, cid: ParsedCid, folderId: string | null): Promise<PublicFile> {
  if (folderId !== null && !(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const file = await deps.db.files.update(userId, cid.multihash, { folderId });
  if (!file) throw new NotFound('file');
  return toPublicFile(file, deps.gatewayUrl);
}

/** An opaque cursor: the position of the last item of a page. */
export const encodeCursor = (f: FileRecord) => Buffer.from(JSON.stringify([f.createdAt, f._id])).toString('base64url');

export function decodeCursor(cursor: string): { createdAt: number; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof createdAt === 'number' && typeof id === 'string') return { createdAt, id };
  } catch {
    // fall through
  }
  throw new InvalidInput('cursor is not one this API gave out', 'INVALID_CURSOR');
}

export async function listFiles(
  deps: FileDeps,
  userId: string,
  q: { folderId?: string | null; name?: string; mimeType?: string; from?: number; to?: number; cursor?: string; limit: number },
): Promise<{ items: PublicFile[]; nextCursor: string | null }> {
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  // One more than asked tells whether another page exists.
  const rows = await deps.db.files.list(userId, { ...q, after, limit: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  return {
    items: page.map((f) => toPublicFile(f, deps.gatewayUrl)),
    nextCursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]!) : null,
  };
}
