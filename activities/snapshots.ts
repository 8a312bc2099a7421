// Activities of the snapshot workflow: lay a folder's tree out as a UnixFS directory, record
// the snapshot (its hold), wait for Cluster to pin it, and clean up.
//
// The directory is built in Kubo's MFS from the files' existing CIDs: `files mkdir` for the
// subfolders and `files cp /ipfs/<cid>` for the files, so no file byte is read. MFS builds
// directories with the node's import settings, those of the unixfs-v1-2025 profile (CIDv1,
// HAMT sharding past 256 KiB estimated by block size, fanout 256), so the root CID equals what
// `ipfs add -r` gives for the same tree (tests/snapshots.test.ts checks it at the boundary).
import { Context } from '@temporalio/activity';
import { listTree } from '../infra/db/folder-tree.js';
import { snapshotKey } from '../infra/db/snapshots.js';
import { parseCid } from '../infra/cid.js';
import { PIN_POLL_MS } from '../infra/constants.js';
import { announceHoldChange } from '../infra/hold-sync.js';
import { LINKED_SIGNAL, snapshotJob, type SnapshotInput, type SnapshotProgress } from '../infra/temporal/contracts/snapshots.js';
import type { ActivityDeps } from './index.js';

/** Where snapshots are built in MFS, one directory per job. */
const WORKSPACE = '/stupa-snapshots';
/** MFS changes between two flushes, each followed by a progress report (heartbeat, signal). */
const FLUSH_EVERY = 200;

const workspace = (input: SnapshotInput) => `${WORKSPACE}/${input.folderId}-${input.digest}`;
const isMissing = (err: unknown) => /does not exist|not found/i.test((err as Error).message);

export function createSnapshotActivities(deps: ActivityDeps) {
  const { db, kubo, cluster, jobs, config } = deps;
  const needed = Math.max(1, config.cluster.replicationMin);
  const dir = { parents: true, cidVersion: 1, flush: false } as const;

  return {
    /**
     * Builds the directory. Heartbeats the number of files linked, so a retry after a worker
     * died resumes there (MFS keeps what was built); the folder having changed since the job
     * was asked for ends it with `changed`.
     */
    async buildSnapshot(
      input: SnapshotInput,
    ): Promise<{ changed: true } | { changed: false; cid: string; fileCount: number; totalSize: number }> {
      const ctx = Context.current();
      const tree = await listTree(db, input.userId, input.folderId);
      if (tree.digest !== input.digest) return { changed: true };
      const base = workspace(input);
      const resumeAt = Number(ctx.info.heartbeatDetails ?? 0);
      if (resumeAt === 0) await kubo.files.rm(base, { recursive: true }).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
      // Kubo refuses more than 256 MFS changes between flushes (Internal.MFSNoFlushLimit), and
      // the count is Kubo's, not this job's: a worker that died, or another snapshot job, may
      // have left changes unflushed. So each attempt starts with a flush, this job flushes every
      // FLUSH_EVERY changes, and a change refused for the limit is made again after a flush.
      await kubo.files.flush('/');
      let unflushed = 0;
      const change = async (op: () => Promise<unknown>) => {
        await op().catch(async (err: Error) => {
          if (!/unflushed MFS operations/.test(err.message)) throw err;
          await kubo.files.flush('/');
          await op();
        });
        if (++unflushed >= FLUSH_EVERY) {
          await kubo.files.flush(base);
          unflushed = 0;
        }
      };
      await change(() => kubo.files.mkdir(base, dir));
      for (const sub of tree.dirs) await change(() => kubo.files.mkdir(`${base}/${sub}`, dir));

      const report = async (linked: number) => {
        ctx.heartbeat(linked);
        const progress: SnapshotProgress = { linked, total: tree.files.length };
        await jobs.signal(snapshotJob, input, LINKED_SIGNAL, [progress]).catch(() => undefined);
      };
      await report(resumeAt);
      for (let i = resumeAt; i < tree.files.length; i++) {
        const file = tree.files[i]!;
        const target = `${base}/${file.path}`;
        await change(() =>
          kubo.files.cp(`/ipfs/${file.cid}`, target, { flush: false }).catch(async (err: Error) => {
            // After a resume the entry may be there already: replace it.
            if (!/already has entry/.test(err.message)) throw err;
            await kubo.files.rm(target, { flush: false });
            await kubo.files.cp(`/ipfs/${file.cid}`, target, { flush: false });
          }),
        );
        // Progress is reported only for what is flushed, so a resume never skips a change
        // that Kubo did not keep.
        if (unflushed === 0) await report(i + 1);
      }
      const root = await kubo.files.flush(base);
      await report(tree.files.length);
      return { changed: false, cid: parseCid(root.toString()).v1, fileCount: tree.files.length, totalSize: tree.totalSize };
    },

    /** The snapshot record is its hold: the sync workflow pins its root (activities/holds.ts). */
    async recordSnapshot(input: SnapshotInput & { cid: string; fileCount: number; totalSize: number; takenAt: number }): Promise<number> {
      const cid = parseCid(input.cid);
      const record = await db.snapshots.insert({
        _id: snapshotKey(input.folderId, cid.multihash),
        userId: input.userId,
        folderId: input.folderId,
        cid: cid.v1,
        multihash: cid.multihash,
        takenAt: input.takenAt,
        fileCount: input.fileCount,
        totalSize: input.totalSize,
      });
      await announceHoldChange(deps, cid.multihash, cid.v1, { kind: 'snapshot', key: record._id });
      return record.takenAt;
    },

    /** Waits until Cluster reports the root pinned (a snapshot that is recorded but not yet
     * pinned is not complete); heartbeats, so a dead worker's wait resumes elsewhere. */
    async awaitSnapshotPinned(input: { cid: string }): Promise<void> {
      const ctx = Context.current();
      for (;;) {
        let status = 'not yet known';
        try {
          const info = await cluster.status(input.cid, { signal: AbortSignal.timeout(10_000) });
          const statuses = Object.values(info.peer_map ?? {}).map((p) => p.status);
          if (statuses.filter((s) => s === 'pinned').length >= needed) return;
          status = statuses.join(', ');
        } catch (err) {
          status = `cluster unreachable (${(err as Error).message})`;
        }
        ctx.heartbeat(status);
        await ctx.sleep(PIN_POLL_MS);
      }
    },

    /** Drops the job's MFS directory; the blocks stay, held by the Cluster pin. */
    async removeSnapshotWorkspace(input: SnapshotInput): Promise<void> {
      await kubo.files.rm(workspace(input), { recursive: true }).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
    },
  };
}
