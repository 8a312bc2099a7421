// Activities that make IPFS Cluster match the holds in MongoDB (infra/db/holds.ts).
//
// This is the one place that argues why the holds machinery is race-free; the sync workflow
// (workflows/holds.ts), the pin workflow, core/hold-sync.ts and docs/architecture/holds-and-pins.md point here. Every
// API process and worker pins and unpins inline (core/hold-sync.ts), the sync workflow and the
// pin workflow pin too, and holds come and go at any time. Three rules:
// 1. Every pin or unpin is followed by a read of the holds, made once Cluster has answered, that
//    agrees with it: a pin by a read that finds a holder, an unpin by one that finds none.
//    Until one agrees, the round goes on (core/hold-sync.ts `syncHolds`, `unpinIfUnheld`).
// 2. Every record's insert is followed by a pin that starts after it, and every removal (delete,
//    `failed`) by a round that starts after it. A removal's round may do nothing when another
//    record holds the content; an IPNS name's insert may, when a record of another kind does.
// 3. Every change is logged before anything else is done for it, and the sweep (below) checks
//    the logged content, repairing what a round that failed (a process dying, Cluster or
//    Temporal down) left behind.
// Then Cluster's last operation on the content is the right one, whatever the interleaving.
// Say it is a pin, confirmed by a read that found a holder: if no record holds the content in
// the end, the last removal's round started when none was left, found none and unpinned, after
// that pin (whose read found a holder, so came before the last removal): a later operation,
// which cannot be. Say it is an unpin, confirmed by a read that found none: a record holding
// the content in the end was inserted after that read, and its pin (or that of the record of
// another kind it saw) came after the unpin: again a later operation.
// This needs Cluster to apply an operation made after another one's answer after it: one peer
// does, as does raft. With CRDT consensus and the two on different peers, a pin that peer has
// not heard of yet survives the unpin (a CRDT's add wins): content pinned that nobody holds, a
// waste the sweep finds (it looks at changed content again for HOLD_CHANGE_RECHECK_MS).
// None of this names a kind of holder: a new kind registers itself in infra/db/index.ts and
// announces its changes with `announceHoldChange`.
import pLimit from 'p-limit';
import { tryParseCid } from '../infra/ipfs/cid.js';
import {
  COUNT_CHECK_AFTER_MS,
  HOLD_CHANGE_PAGE,
  HOLD_CHANGE_RECHECK_MS,
  HOLD_CHANGE_RETAIN_MS,
  HOLD_CHANGE_SETTLE_MS,
  PROCESS_FORGET_AFTER_MS,
} from '../infra/constants.js';
import { createClusterPinner, PIN_METADATA, syncHolds, unpinIfUnheld, type SyncDeps } from '../core/hold-sync.js';
import { lostByRestore, type RestoreRecord } from '../core/restores.js';
import { requestSync, type HolderRef } from '../infra/temporal/contracts/holds.js';
import type { SweepHolds } from '../infra/temporal/contracts/sweep.js';
import { createCountCheck } from './counts.js';
import type { ActivityDeps } from './deps.js';

export function createHoldActivities(deps: ActivityDeps) {
  const { db, cluster, jobs, kubo } = deps;
  const pin = createClusterPinner(deps);
  const inline: SyncDeps = { db, cluster, pin };
  const limit = pLimit(16);

  /** Asks for a sync when Cluster's pin (this service's) and the holds disagree. A sync
   * already under way may make them disagree for a moment; the extra round is harmless.
   * `restores`: the database's restores, read once a round and only when needed. */
  async function resyncIfDifferent(
    multihash: string,
    cid: string,
    held: boolean,
    restores: () => Promise<RestoreRecord[]>,
  ): Promise<boolean> {
    const allocation = await cluster.allocation(cid, { signal: AbortSignal.timeout(10_000) });
    const pinned = allocation?.metadata?.service === PIN_METADATA.service;
    if (pinned === held) return !pinned && !allocation && (await unpinLeftInKubo(multihash, cid));
    // A pin no record holds that a restore may have left (core/restores.ts) is the audit's to
    // report and the operator's to release, never the sweep's to unpin. The sweep sees only
    // content in the change log, and a restore rolls the log back with the records, so its
    // first rounds after one look again at changes logged shortly before the backup: the content
    // of one of those may since have been pinned for a record the restore forgot.
    if (pinned && lostByRestore(allocation?.metadata?.at, await restores())) return false;
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
      return syncHolds(inline, input.multihash, input.cid);
    },

    /** Round for added records: pins for the first of them that still holds the content, and
     * confirms it. When none does (an inline pin made for one may have failed only in its
     * answer), or it went meanwhile, unpins unless another record holds the content. */
    async pinHeld(input: { multihash: string; cid: string; refs: HolderRef[] }): Promise<void> {
      for (const ref of input.refs) {
        const held = await db.holds.holds(ref);
        if (!held) continue;
        await pin(held.cid, held.origins, { account: held.userId, record: `${ref.kind}:${held.id}` });
        if (await db.holds.holds(ref)) return;
        break;
      }
      await unpinIfUnheld(inline, input.multihash, input.cid);
    },

    /**
     * The sweep's round, incremental: checks only the content whose holds changed since the
     * last round, as the change log has it (infra/db/hold-changes.ts; every change is logged
     * before its signal, core/hold-sync.ts), and the counters those changes moved
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
      let restores: Promise<RestoreRecord[]> | undefined;
      const restoreWindows = () => (restores ??= db.restores.all());
      let resynced = 0;
      for (let page = await db.holdChanges.page(from, upTo, HOLD_CHANGE_PAGE); page.length > 0;) {
        for (const c of page) if (c.at > countsFrom && c.at <= countsUpTo) counts.note(c);
        // An entry whose CID does not parse (written by a bug, or by hand) is passed over: asking
        // Cluster about it would fail the round, and every retry of it, for good.
        const fresh = page.filter((c) => tryParseCid(c.cid) !== undefined && !seen.has(c.multihash) && seen.add(c.multihash));
        // Whether each is held: one query per holder kind for the page, read before Cluster is asked.
        const held = await db.holds.heldAmong(fresh.map((c) => c.multihash));
        const differed = await Promise.all(
          fresh.map((c) => limit(() => resyncIfDifferent(c.multihash, c.cid, held.has(c.multihash), restoreWindows))),
        );
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
