// Snapshot use-cases. A snapshot is the UnixFS directory of a folder's tree, built by a
// durable workflow (workflows/snapshots.ts) whose ID names the folder and the digest of its
// listing: asking while it runs finds the same job, and asking for an unchanged folder finds
// the snapshot it made. A snapshot record is a hold on its directory until deleted.
import { listTree } from '../infra/db/folder-tree.js';
import { snapshotKey, type SnapshotRecord } from '../infra/db/snapshots.js';
import { parseCid, type ParsedCid } from '../infra/ipfs/cid.js';
import { snapshotJob, PROGRESS_QUERY, type SnapshotProgress, type SnapshotResult } from '../infra/temporal/contracts/snapshots.js';
import { holdsChanged } from './content.js';
import type { UseCaseDeps } from './deps.js';
import { NotFound } from './errors.js';
import { decodeCursor, toPage } from './pages.js';

type SnapshotDeps = Pick<UseCaseDeps, 'db' | 'jobs'>;

export interface SnapshotJobView {
  /** The job: `<folderId>:<digest>` of the listing it snapshots; null when none was asked for. */
  id: string | null;
  folderId: string;
  /** `none`: no job asked for (or its snapshot was deleted since, or the folder changed while it ran). */
  status: 'none' | 'running' | 'complete';
  progress: SnapshotProgress | null;
  snapshot: SnapshotRecord | null;
}

async function ownFolder(deps: SnapshotDeps, userId: string, folderId: string) {
  const folder = await deps.db.folders.findForUser(userId, folderId);
  if (!folder) throw new NotFound('folder');
  return folder;
}

/** Where the job for the folder's current content stands. */
async function jobFor(deps: SnapshotDeps, userId: string, folderId: string, digest: string): Promise<SnapshotJobView> {
  const key = { folderId, digest };
  const base = { id: `${folderId}:${digest}`, folderId };
  const job = await deps.jobs.state(snapshotJob, key);
  if (job.state === 'running') {
    const progress = await deps.jobs.query<typeof key, never, SnapshotProgress>(snapshotJob, key, PROGRESS_QUERY).catch(() => null);
    return { ...base, status: 'running', progress, snapshot: null };
  }
  if (job.state === 'completed') {
    const result = job.result as SnapshotResult;
    if (result.status === 'complete') {
      const { multihash } = parseCid(result.cid);
      const snapshot = await deps.db.snapshots.get(snapshotKey(folderId, multihash));
      if (snapshot?.userId === userId) {
        return { ...base, status: 'complete', progress: { linked: result.fileCount, total: result.fileCount }, snapshot };
      }
    }
  }
  return { ...base, status: 'none', progress: null, snapshot: null };
}

/** Snapshots the folder as it is now, or finds the job (or snapshot) that does. */
export async function startSnapshot(deps: SnapshotDeps, userId: string, folderId: string): Promise<SnapshotJobView> {
  const folder = await ownFolder(deps, userId, folderId);
  const tree = await listTree(deps.db, userId, folderId);
  const found = await jobFor(deps, userId, folderId, tree.digest);
  if (found.status === 'none') {
    // The job reads the listing made here instead of listing again. A running job with this
    // ID is kept; one that ended is started afresh.
    await deps.db.snapshotListings.save(folderId, tree);
    await deps.jobs.start(snapshotJob, { userId, folderId, digest: tree.digest });
  }
  if (folder.snapshotDigest !== tree.digest) await deps.db.folders.setSnapshotDigest(folderId, tree.digest);
  return found.status === 'none' ? { ...found, status: 'running', progress: { linked: 0, total: tree.files.length } } : found;
}

/** Where the job last asked for stands: the folder's record names it, so nothing is listed. */
export async function snapshotStatus(deps: SnapshotDeps, userId: string, folderId: string): Promise<SnapshotJobView> {
  const folder = await ownFolder(deps, userId, folderId);
  if (!folder.snapshotDigest) return { id: null, folderId, status: 'none', progress: null, snapshot: null };
  return jobFor(deps, userId, folderId, folder.snapshotDigest);
}

/** The folder's snapshots, newest first. */
export async function listSnapshots(
  deps: SnapshotDeps,
  userId: string,
  folderId: string,
  q: { cursor?: string; limit: number },
): Promise<{ items: SnapshotRecord[]; nextCursor: string | null }> {
  if (!(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const rows = await deps.db.snapshots.list(folderId, { after: after && { takenAt: after.at, id: after.id }, limit: q.limit + 1 });
  return toPage(rows, q.limit, (s) => ({ at: s.takenAt, id: s._id }));
}

/** Deletes a snapshot, releasing its hold: its directory leaves Cluster unless held otherwise. */
export async function deleteSnapshot(deps: SnapshotDeps, userId: string, folderId: string, cid: ParsedCid): Promise<{ cid: string }> {
  if (!(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
  const snapshot = await deps.db.snapshots.get(snapshotKey(folderId, cid.multihash));
  if (snapshot?.userId !== userId || !(await deps.db.snapshots.delete(snapshot._id))) throw new NotFound('snapshot');
  await holdsChanged(deps, cid);
  return { cid: snapshot.cid };
}
