// Activities of the snapshot workflow: lay a folder's tree out as a UnixFS directory, record
// the snapshot (its hold), and wait for Cluster to pin it.
//
// The directory blocks are built here from the files' existing CIDs (infra/ipfs/unixfs.ts, the
// layout of `ipfs add -r` with the unixfs-v1-2025 profile) and stored in Kubo with one CAR
// import, so no file byte is read and Kubo is called once, not once per file. (Kubo's MFS
// could build the same directory, at one RPC per file: 25 s for 10,000 files, where `ipfs
// add -r` of the same bytes takes 2.7 s.) The import pins the root in Kubo, which keeps the new
// blocks from a garbage collection until Cluster's pin, the same Kubo pin, takes over.
import { Context } from '@temporalio/activity';
import { CarWriter } from '@ipld/car/writer';
import * as raw from 'multiformats/codecs/raw';
import pLimit from 'p-limit';
import { listTree } from '../infra/db/folder-tree.js';
import { snapshotKey } from '../infra/db/snapshots.js';
import { parseCid, storedCid } from '../infra/ipfs/cid.js';
import { PIN_POLL_MS, SNAPSHOT_ROOT_READS } from '../infra/constants.js';
import { announceHoldChange, pinnedPeers } from '../core/hold-sync.js';
import { recordEvent } from '../core/webhook-events.js';
import { importCarStream } from '../infra/ipfs/kubo.js';
import { buildTree, cumulativeSize, type Block } from '../infra/ipfs/unixfs.js';
import { LINKED_SIGNAL, snapshotJob, type SnapshotInput, type SnapshotProgress } from '../infra/temporal/contracts/snapshots.js';
import type { ActivityDeps } from './deps.js';

/** Files whose sizes are looked up between two progress reports. */
const REPORT_EVERY = 1000;

export function createSnapshotActivities(deps: ActivityDeps) {
  const { db, kubo, cluster, jobs, config } = deps;
  const needed = Math.max(1, config.cluster.replicationMin);

  return {
    /**
     * Builds and stores the directory of the listing the job was asked for. That listing is
     * kept for the job (infra/db/snapshot-listings.ts); when it is not (too large), the folder
     * is listed again, and its having changed since ends the job with `changed`. Building
     * again gives the same blocks, so a retry after a worker died starts over.
     */
    async buildSnapshot(
      input: SnapshotInput,
    ): Promise<{ changed: true } | { changed: false; cid: string; fileCount: number; totalSize: number }> {
      const ctx = Context.current();
      const signal = ctx.cancellationSignal;
      const tree = (await db.snapshotListings.get(input.folderId, input.digest)) ?? (await listTree(db, input.userId, input.folderId));
      if (tree.digest !== input.digest) return { changed: true };
      const report = async (linked: number) => {
        ctx.heartbeat(linked);
        const progress: SnapshotProgress = { linked, total: tree.files.length };
        await jobs.signal(snapshotJob, input, LINKED_SIGNAL, [progress]).catch(() => undefined);
      };
      await report(0);

      // A link's size is the linked DAG's cumulative size: kept with the file since it was
      // uploaded; a raw block's is its length; otherwise the root block tells (one small read).
      const files = tree.files.map((file) => {
        const cid = storedCid(file.cid);
        return { path: file.path, cid, tsize: file.dagSize ?? (cid.code === raw.code ? file.size : -1) };
      });
      const unknown = files.filter((file) => file.tsize < 0);
      const reads = pLimit(SNAPSHOT_ROOT_READS);
      let read = 0;
      await Promise.all(
        unknown.map((file) =>
          reads(async () => {
            file.tsize = cumulativeSize(file.cid, await kubo.block.get(file.cid, { signal }));
            if (++read % REPORT_EVERY === 0) await report(files.length - unknown.length + read);
          }),
        ),
      );
      const blocks: Block[] = [];
      const root = await buildTree(tree.dirs, files, (block) => void blocks.push(block));
      await report(tree.files.length);

      // Storing may take a while for a large tree (Kubo walks it to pin the root): heartbeat.
      const beat = setInterval(() => ctx.heartbeat(tree.files.length), 2_000);
      try {
        const { writer, out } = CarWriter.create([root.cid]);
        const stored = importCarStream(config.kubo.apiUrl, out, signal);
        for (const block of blocks) await writer.put(block);
        await writer.close();
        await stored;
      } finally {
        clearInterval(beat);
      }
      return { changed: false, cid: parseCid(root.cid.toString()).v1, fileCount: tree.files.length, totalSize: tree.totalSize };
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
      await announceHoldChange(deps, cid.multihash, cid.v1, { kind: 'snapshot', key: record._id, userId: record.userId });
      return record.takenAt;
    },

    /** Tells the account's webhooks how the snapshot ended (`snapshot.completed` once pinned). */
    async announceSnapshot(
      input: SnapshotInput &
        ({ status: 'complete'; cid: string; fileCount: number; totalSize: number; takenAt: number } | { status: 'failed'; error: string }),
    ): Promise<void> {
      const subject = `snapshot:${input.folderId}:${input.digest}`;
      const id = `msg_snapshot_${input.status}_${input.folderId}_${input.digest}`;
      if (input.status === 'failed') {
        await recordEvent(deps, input.userId, {
          type: 'snapshot.failed',
          subject,
          id,
          data: { folderId: input.folderId, error: input.error },
        });
        return;
      }
      const cid = parseCid(input.cid);
      const snapshot = await db.snapshots.get(snapshotKey(input.folderId, cid.multihash));
      if (snapshot)
        await recordEvent(deps, input.userId, { type: 'snapshot.completed', subject, id, data: { folderId: input.folderId, snapshot } });
    },

    /** The job is over: its listing goes. */
    async dropSnapshotListing(input: SnapshotInput): Promise<void> {
      await db.snapshotListings.drop(input.folderId, input.digest);
    },

    /** Waits until Cluster reports the root pinned (a snapshot that is recorded but not yet
     * pinned is not complete); heartbeats, so a dead worker's wait resumes elsewhere. */
    async awaitSnapshotPinned(input: { cid: string }): Promise<void> {
      const ctx = Context.current();
      // The root is in Kubo already, so Cluster's pin takes a moment: look again soon at
      // first, then every PIN_POLL_MS.
      for (let wait = 50; ; wait = Math.min(wait * 2, PIN_POLL_MS)) {
        let status = 'not yet known';
        try {
          const { pinned, statuses } = await pinnedPeers(cluster, input.cid);
          if (pinned >= needed) return;
          status = statuses.join(', ');
        } catch (err) {
          status = `cluster unreachable (${(err as Error).message})`;
        }
        ctx.heartbeat(status);
        await ctx.sleep(wait);
      }
    },
  };
}
