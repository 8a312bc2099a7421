// Activities that make IPFS Cluster match the holds in MongoDB.
import { tryParseCid } from '../infra/cid.js';
import type { ActivityDeps } from './index.js';

/** Cluster pins made by this service carry this metadata, so the sweep never touches others'. */
export const PIN_METADATA = { service: 'stupa' };

export function createHoldActivities({ db, cluster, jobs, config }: ActivityDeps) {
  return {
    /** One round of the sync workflow: pin when anyone holds the content, unpin when nobody does. */
    async syncCid(input: { multihash: string; cid: string }): Promise<'pinned' | 'unpinned'> {
      const holds = await db.holds.of(input.multihash);
      if (holds.holders.length === 0) {
        await cluster.unpin(input.cid);
        return 'unpinned';
      }
      await cluster.pin(holds.cid ?? input.cid, {
        replicationMin: config.cluster.replicationMin,
        replicationMax: config.cluster.replicationMax,
        origins: holds.origins,
        metadata: PIN_METADATA,
      });
      return 'pinned';
    },

    /**
     * Anti-entropy: compares Cluster's pins (this service's) with the holds and asks the sync
     * workflow of every piece of content where they differ to run. It repairs what a lost
     * signal (Temporal down right after a hold changed) would leave behind.
     */
    async resyncDifferences(): Promise<number> {
      const [held, pinned] = await Promise.all([db.holds.heldContent(), cluster.allocations()]);
      const ours = new Map<string, string>();
      for (const pin of pinned) {
        const parsed = pin.metadata?.service === PIN_METADATA.service ? tryParseCid(pin.cid) : undefined;
        if (parsed) ours.set(parsed.multihash, pin.cid);
      }
      const differing = [
        ...[...held].filter(([multihash]) => !ours.has(multihash)),
        ...[...ours].filter(([multihash]) => !held.has(multihash)),
      ];
      for (const [multihash, cid] of differing) await jobs.requestSync(multihash, cid);
      return differing.length;
    },
  };
}
