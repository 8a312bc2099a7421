// Folder use-cases: a user's tree of folders. A folder's path is derived from its parents, so
// renaming or moving one never rewrites its files. Deleting a folder releases every hold in it
// (its files' and its snapshots') through the same reference-counted unpin as DELETE /pin.
import type { FolderRecord } from '../infra/db/folders.js';
import type { SnapshotRecord } from '../infra/db/snapshots.js';
import { parseCid } from '../infra/ipfs/cid.js';
import { randomBase62 } from '../infra/secrets.js';
import { holdsChanged } from './content.js';
import type { UseCaseDeps } from './deps.js';
import { Conflict, InvalidInput, NotFound } from './errors.js';
import { removeFile } from './files.js';
import { decodeCursor, toPage } from './pages.js';

type FolderDeps = Pick<UseCaseDeps, 'db' | 'jobs' | 'config'>;

export interface FolderView extends FolderRecord {
  /** Files directly in the folder. */
  fileCount: number;
  latestSnapshot: SnapshotRecord | null;
}

/** A folder name is a UnixFS path segment: a snapshot makes it a directory name. */
export function folderName(name: string): string {
  if (name.length === 0 || Buffer.byteLength(name) > 255 || name.includes('/') || name === '.' || name === '..') {
    throw new InvalidInput('a folder name is 1 to 255 bytes, without "/", and not "." or ".."', 'INVALID_FOLDER_NAME');
  }
  return name;
}

const nameTaken = (name: string) => new Conflict('FOLDER_EXISTS', `a folder named ${JSON.stringify(name)} exists there already`);

async function ownFolder(deps: FolderDeps, userId: string, folderId: string, what = 'folder'): Promise<FolderRecord> {
  const folder = await deps.db.folders.findForUser(userId, folderId);
  if (!folder) throw new NotFound(what);
  return folder;
}

async function view(deps: FolderDeps, folder: FolderRecord): Promise<FolderView> {
  const [fileCount, [latestSnapshot]] = await Promise.all([
    folder.fileCount ?? deps.db.files.countInFolder(folder.userId, folder._id),
    deps.db.snapshots.list(folder._id, { limit: 1 }),
  ]);
  return { ...folder, fileCount, latestSnapshot: latestSnapshot ?? null };
}

export async function createFolder(deps: FolderDeps, userId: string, input: { name: string; parentFolderId?: string | null }) {
  const parentFolderId = input.parentFolderId ?? null;
  if (parentFolderId !== null) await ownFolder(deps, userId, parentFolderId, 'parent folder');
  const now = Date.now();
  const folder: FolderRecord = {
    _id: `fld_${randomBase62(16)}`,
    userId,
    name: folderName(input.name),
    parentFolderId,
    fileCount: 0,
    createdAt: now,
    updatedAt: now,
  };
  if (!(await deps.db.folders.insert(folder))) throw nameTaken(folder.name);
  return view(deps, folder);
}

export async function getFolder(deps: FolderDeps, userId: string, folderId: string): Promise<FolderView> {
  return view(deps, await ownFolder(deps, userId, folderId));
}

/** The user's folders, newest first; `parentFolderId` (null: the top level) for one level. */
export async function listFolders(
  deps: FolderDeps,
  userId: string,
  q: { parentFolderId?: string | null; cursor?: string; limit: number },
): Promise<{ items: FolderView[]; nextCursor: string | null }> {
  if (q.parentFolderId) await ownFolder(deps, userId, q.parentFolderId, 'parent folder');
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.folders.list(userId, {
    parentFolderId: q.parentFolderId,
    after: after && { createdAt: after.at, id: after.id },
    limit: q.limit + 1,
  });
  const page = toPage(rows, q.limit, (f) => ({ at: f.createdAt, id: f._id }));
  return { items: await Promise.all(page.items.map((f) => view(deps, f))), nextCursor: page.nextCursor };
}

/** Renames and/or moves a folder (`parentFolderId` null: to the top level). A move under
 * itself or one of its own subfolders is refused. */
export async function updateFolder(
  deps: FolderDeps,
  userId: string,
  folderId: string,
  changes: { name?: string; parentFolderId?: string | null },
): Promise<FolderView> {
  const folder = await ownFolder(deps, userId, folderId);
  const set: { name?: string; parentFolderId?: string | null } = {};
  if (changes.name !== undefined) set.name = folderName(changes.name);
  const apply = async () => {
    const updated = await deps.db.folders.update(folder._id, set);
    if (updated === false) throw nameTaken(set.name ?? folder.name);
    if (!updated) throw new NotFound('folder');
    return view(deps, updated);
  };
  if (changes.parentFolderId === undefined) return apply();
  set.parentFolderId = changes.parentFolderId;
  // Moves are decided one at a time per user: two crossing moves (A under B, B under A) would
  // each pass the cycle check alone.
  return deps.db.locks.withLock(`folders:${userId}`, async () => {
    for (let at = changes.parentFolderId ?? null; at !== null;) {
      if (at === folder._id) throw new InvalidInput('a folder cannot be moved under itself or one of its subfolders', 'FOLDER_CYCLE');
      at = (await ownFolder(deps, userId, at, 'parent folder')).parentFolderId;
    }
    return apply();
  });
}

/**
 * Deletes a folder. One with files or subfolders is refused unless `recursive`, which deletes
 * everything under it. Every file and snapshot deleted releases its hold: the content leaves
 * Cluster once nobody else holds it.
 */
export async function deleteFolder(deps: FolderDeps, userId: string, folderId: string, recursive: boolean): Promise<void> {
  const root = await ownFolder(deps, userId, folderId);
  if (await deps.db.buckets.byFolder(userId, root._id)) {
    throw new Conflict('FOLDER_BACKS_BUCKET', 'the folder backs an S3 bucket; delete the bucket (DeleteBucket) instead');
  }
  if (!recursive) {
    const [children, files] = await Promise.all([
      deps.db.folders.children(userId, root._id),
      deps.db.files.countInFolder(userId, root._id),
    ]);
    if (children.length > 0 || files > 0) {
      throw new Conflict('FOLDER_NOT_EMPTY', `the folder holds ${files} files and ${children.length} folders; delete with ?recursive=true`);
    }
  }
  // Depth first, children before their parent, so an interrupted delete leaves a smaller tree
  // that a second delete finishes.
  const order: FolderRecord[] = [];
  for (const stack = [root]; stack.length > 0;) {
    const folder = stack.pop()!;
    order.unshift(folder);
    stack.push(...(await deps.db.folders.children(userId, folder._id)));
  }
  await deps.db.usage.ensure(userId); // before any record changes (infra/db/usage.ts)
  for (const folder of order) {
    for (const file of await deps.db.files.inFolder(userId, folder._id)) {
      await removeFile(deps, file);
      await holdsChanged(deps, parseCid(file.cid), undefined, { logged: true });
    }
    for (
      let page = await deps.db.snapshots.list(folder._id, { limit: 500 });
      page.length > 0;
      page = await deps.db.snapshots.list(folder._id, { limit: 500 })
    ) {
      for (const snapshot of page) {
        await deps.db.snapshots.delete(snapshot._id);
        await holdsChanged(deps, parseCid(snapshot.cid));
      }
    }
    await deps.db.cors.delete(folder._id);
    await deps.db.folders.delete(folder._id);
  }
}
