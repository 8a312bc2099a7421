// Activities that make IPFS Cluster match the holds in MongoDB (infra/db/holds.ts).
//
// This is the one place that argues why the holds machinery is race-free; the sync workflow
// (workflows/holds.ts), the pin workflow, infra/hold-sync.ts and the README point here. Why no
// hold is ever left unpinned, nor content pinned with no holder, although three kinds of
// pinner pin (the sync workflow, the pin workflow, and whoever adds a record, inline:
// infra/hold-sync.ts) and holds come and go at any time:
// - Only the sync workflow's full round unpins, and after unpinning it reads the holds again
//   and pins back if there are any. A hold inserted before that second read is seen by it; a
//   hold inserted after it is pinned by its own pinner, which starts after the insert, so
//   after the unpin. Either way Cluster's last word is a pin.
// - Whoever pins for a record pins first and then checks that the record (or another holder)
//   still holds the content; if not, it asks for a full round. A record removed after that
//   check sends its own full-round signal, which runs after the pin. Either way an unpin
//   follows a pin made for a record that is gone. (The sync workflow's round for an added
//   record, `pinHeld`, checks first and pins after: it may, because it runs inside the
//   content's workflow, so a removal's full round can only run after it.)
// Every removal of a hold (delete, `failed`) signals a full round; every change is logged
// before anything else is done for it (infra/hold-sync.ts), and the sweep checks the logged
// content, repairing what a pinner or a signal that failed (a process dying, Cluster or
// Temporal down) left behind. None of this names a kind of holder: a new kind registers itself
// in infra/db/index.ts and announces its changes with `announceHoldChange`.
import pLimit from 'p-limit';
import { tryParseCid } from '../infra/cid.js';
import {
  COUNT_CHECK_AFTER_MS,
  HOLD_CHANGE_PAGE,
  HOLD_CHANGE_RECHECK_MS,
  HOLD_CHANGE_RETAIN_MS,
  HOLD_CHANGE_SETTLE_MS,
  PROCESS_FORGET_AFTER_MS,
} from '../infra/constants.js';
import { createClusterPinner, PIN_METADATA } from '../infra/hold-sync.js';
import { requestSync, type HolderRef } from '../infra/temporal/contracts/holds.js';
import type { SweepHolds } from '../infra/temporal/contracts/sweep.js';
import { createCountCheck } from './counts.js';
import type { ActivityDeps } from './deps.js';

export function createHoldActivities(deps: ActivityDeps) {
  const { db, cluster, jobs, kubo } = deps;
  const pin = createClusterPinner(deps);
  const limit = pLimit(16);

  /** Asks for a sync when Cluster's pin (this service's) and the holds disagree. A sync
   * already under way may make them disagree for a moment; the extra round is harmless. */
  async function resyncIfDifferent(multihash: string, cid: string, held: boolean): Promise<boolean> {
    const allocation = await cluster.allocation(cid, { signal: AbortSignal.timeout(10_000) });
    const pinned = allocation?.metadata?.service === PIN_METADATA.service;
    if (pinned === held) return !pinned && !allocation && (await unpinLeftInKubo(multihash, cid));
    // The sync workflow reads the holds again, and pins by a holder's CID.
    await requestSync(jobs, multihash, cid);
    return true;
  }

  /**
   * Content nobody holds and Cluster does not pin may still be pinned in Kubo: a Cluster peer
   * killed after it dropped the pin from its state and before it unpinned it in Kubo forgets the
   * second step (measured by npm run chaos: about 15 of 250 deletes around a kill). Unpinned
   * here, after the holds are read once more; true when it was. A record added between that
   * read and the unpin has its pin in Cluster's state, which Cluster's own recovery (and the
   * audit's cluster-not-in-kubo) puts back in Kubo.
   */
  async function unpinLeftInKubo(multihash: string, cid: string): Promise<boolean> {
    let inKubo = false;
    try {
      for await (const pin of kubo.pin.ls({ paths: [cid], type: 'recursive', signal: AbortSignal.timeout(10_000) }))
        inKubo ||= Boolean(pin);
    } catch {
      return false; // "not pinned", or Kubo away: nothing to do now
    }
    if (!inKubo || (await db.holds.heldAmong([multihash])).size > 0) return false;
    await kubo.pin.rm(cid, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
    return true;
  }

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
     * The sweep's round, incremental: checks only the content whose holds changed since the
     * last round, as the change log has it (infra/db/hold-changes.ts; every change is logged
     * before its signal, infra/hold-sync.ts), and the counters those changes moved
     * (activities/counts.ts), and asks the sync workflow of each one whose
     * Cluster pin does not match its holds to run. It repairs what a lost signal (Temporal
     * down right after a hold changed) would leave behind, in work proportional to the
     * changes, not to all content. The audit (activities/audit/) is the full comparison.
     *
     * Each changed CID costs a read of its holds and one Cluster lookup of that CID, and only
     * a difference costs a signal. Signalling every changed CID instead would be simpler but
     * dearer: each signal starts a workflow (history written to Temporal's store) that does
     * the same read plus a Cluster pin or unpin, while nearly every change was already synced
     * by its own signal.
     */
    async resyncDifferences(): Promise<SweepHolds> {
      const watermark = await db.holdChanges.watermark();
      // Looking back HOLD_CHANGE_RECHECK_MS as well: what a crashed Cluster forgot (constants.ts).
      const from = Math.max(0, watermark - HOLD_CHANGE_RECHECK_MS);
      const upTo = Date.now() - HOLD_CHANGE_SETTLE_MS;
      if (upTo <= from) return { checked: 0, resynced: 0, countsChecked: 0, recounted: 0, foldersSet: 0 };
      // Each change's counters are checked once, in the round that finds it COUNT_CHECK_AFTER_MS old.
      const counts = createCountCheck(deps);
      const countsFrom = watermark - COUNT_CHECK_AFTER_MS;
      const countsUpTo = upTo - COUNT_CHECK_AFTER_MS;
      const seen = new Set<string>();
      let resynced = 0;
      for (let page = await db.holdChanges.page(from, upTo, HOLD_CHANGE_PAGE); page.length > 0;) {
        for (const c of page) if (c.at > countsFrom && c.at <= countsUpTo) counts.note(c);
        // An entry whose CID does not parse (written by a bug, or by hand) is passed over: asking
        // Cluster about it would fail the round, and every retry of it, for good.
        const fresh = page.filter((c) => tryParseCid(c.cid) !== undefined && !seen.has(c.multihash) && seen.add(c.multihash));
        // Whether each is held: one query per holder kind for the page, read before Cluster is asked.
        const held = await db.holds.heldAmong(fresh.map((c) => c.multihash));
        const differed = await Promise.all(fresh.map((c) => limit(() => resyncIfDifferent(c.multihash, c.cid, held.has(c.multihash)))));
        resynced += differed.filter(Boolean).length;
        const last = page[page.length - 1]!;
        if (page.length < HOLD_CHANGE_PAGE) break;
        // Progress kept page by page (a long backlog survives a timeout); changes stamped in
        // the same millisecond as the page's last one may be checked again, which is harmless.
        await db.holdChanges.advance(last.at - 1);
        page = await db.holdChanges.page(from, upTo, HOLD_CHANGE_PAGE, last._id);
      }
      const counted = await counts.settle();
      await db.holdChanges.advance(upTo);
      await db.holdChanges.deleteBefore(upTo - HOLD_CHANGE_RETAIN_MS);
      await db.processes.deleteGoneBefore(Date.now() - PROCESS_FORGET_AFTER_MS);
      return { checked: seen.size, resynced, ...counted };
    },
  };
}
