// Activities that make IPFS Cluster match the holds in MongoDB (infra/db/holds.ts).
//
// This is the one place that argues why the holds machinery is race-free; the sync workflow
// (workflows/holds.ts), the pin workflow and the README point here. Why no hold is ever left unpinned, nor content pinned with no holder, although both the
// sync workflow (workflows/holds.ts) and the pin workflow pin, and holds come and go at
// any time:
// - Only the sync workflow's full round unpins, and after unpinning it reads the holds again
//   and pins back if there are any. A hold inserted before that second read is seen by it; a
//   hold inserted after it is pinned by its own pinner, which starts after the insert, so
//   after the unpin. Either way Cluster's last word is a pin.
// - Whoever pins for a record pins first and then checks that the record (or another holder)
//   still holds the content; if not, it asks for a full round. A record removed after that
//   check sends its own full-round signal, which runs after the pin. Either way an unpin
//   follows a pin made for a record that is gone.
// Every removal of a hold (delete, `failed`) signals a full round; the sweep repairs signals
// lost while Temporal was down. None of this names a kind of holder: a new kind registers
// itself in infra/db/index.ts and announces its changes with `requestSync`.
import { tryParseCid } from '../infra/cid.js';
import { requestSync, type HolderRef } from '../infra/temporal/contracts/holds.js';
import type { ActivityDeps } from './index.js';

/** Cluster pins made by this service carry this metadata, so the sweep never touches others'. */
export const PIN_METADATA = { service: 'stupa' };

export function createClusterPinner({ cluster, config }: Pick<ActivityDeps, 'cluster' | 'config'>) {
  return (cid: string, origins: string[]) =>
    cluster.pin(cid, {
      replicationMin: config.cluster.replicationMin,
      replicationMax: config.cluster.replicationMax,
      origins,
      metadata: PIN_METADATA,
    });
}

export function createHoldActivities(deps: ActivityDeps) {
  const { db, cluster, jobs } = deps;
  const pin = createClusterPinner(deps);
  return {
    /** Full round of the sync workflow: pin when anyone holds the content, unpin when nobody does. */
    async syncCid(input: { multihash: string; cid: string }): Promise<'pinned' | 'unpinned'> {
      let holds = await db.holds.of(input.multihash);
      if (holds.holders.length === 0) {
        await cluster.unpin(input.cid);
        // A hold that came between the read and the unpin must not stay unpinned.
        holds = await db.holds.of(input.multihash);
        if (holds.holders.length === 0) return 'unpinned';
      }
      await pin(holds.cid ?? input.cid, holds.origins);
      return 'pinned';
    },

    /** Round for added records: pins the content if one of them still holds it. A record that
     * is already gone sent a full-round signal of its own. */
    async pinHeld(input: { multihash: string; cid: string; refs: HolderRef[] }): Promise<'pinned' | 'no holder'> {
      for (const ref of input.refs) {
        const held = await db.holds.holds(ref);
        if (held) {
          await pin(held.cid, held.origins);
          return 'pinned';
        }
      }
      return 'no holder';
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
      for (const [multihash, cid] of differing) await requestSync(jobs, multihash, cid);
      return differing.length;
    },
  };
}
