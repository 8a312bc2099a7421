// The audit of content: holds in MongoDB ↔ Cluster's pin set ↔ Kubo's pins. Each side is read
// as a stream or in pages (the holding records by their {multihash} indexes, Cluster's pins as
// it streams them, Kubo's as it lists them), so memory stays flat however much is stored; each
// lookup on the other side is by CID or by a page of multihashes.
//
// Beside traffic a record may be a moment ahead of its pin (an upload's pinner runs after the
// insert) or a pin ahead of its record's delete: a difference is a suspect, reported only if
// a second look finds it still there (report.ts).
import pLimit from 'p-limit';
import { tryParseCid } from '../../infra/ipfs/cid.js';
import type { Allocation } from '../../infra/ipfs/cluster.js';
import { AUDIT_CONCURRENCY, AUDIT_PAGE } from '../../infra/constants.js';
import { PIN_METADATA } from '../../core/hold-sync.js';
import { lostByRestore, type LostByRestore, type RestoreRecord } from '../../core/restores.js';
import type { AuditPart, Disagreement } from '../../infra/temporal/contracts/audit.js';
import { requestSync } from '../../infra/temporal/contracts/holds.js';
import type { ActivityDeps } from '../deps.js';
import { createFindings, type Findings } from './report.js';

// `ipfs init` pins the empty UnixFS directory itself (the root MFS starts from): Kubo's own.
const EMPTY_DIRECTORY = tryParseCid('QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn')!.multihash;

const ours = (pin: Allocation | null) => pin?.metadata?.service === PIN_METADATA.service;

const iso = (ms: number) => new Date(ms).toISOString();

/** A pin no record holds that a restore may have left: reported with whose it says it is, and
 * kept whatever --repair says. */
function pinnedAfterBackup(cid: string, metadata: Record<string, string>, lost: LostByRestore): Disagreement {
  const { account, record } = metadata;
  const when = lost.at === null ? 'at a time it does not say (an older version pinned it)' : iso(lost.at);
  const backup = `the backup taken ${iso(lost.restore.takenAt)} and restored ${iso(lost.restore.restoredAt)}`;
  return {
    kind: 'pinned-after-backup',
    subject: cid,
    ...(account ? { userId: account } : {}),
    detail:
      `Cluster pins it for account ${account ?? 'unknown'}, record ${record ?? 'unknown'}, pinned ${when}; no record holds it, ` +
      `and ${backup} may have forgotten its record: kept (no repair unpins it)`,
  };
}

/** Groups a stream into arrays of `size`, so that each is checked with one query or in parallel. */
async function* batches<T>(items: AsyncIterable<T>, size: number): AsyncGenerator<T[]> {
  let batch: T[] = [];
  for await (const item of items) {
    batch.push(item);
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

export function createContentAudit(deps: ActivityDeps) {
  const { db, cluster, kubo, jobs } = deps;
  const limit = pLimit(AUDIT_CONCURRENCY);

  /** Every content a record holds has this service's pin in Cluster. */
  async function heldIsPinned(f: Findings, repair: boolean, progress: () => void): Promise<void> {
    const reported = new Set<string>(); // content held by several kinds is reported once
    for (const kind of db.holds.all) {
      for (let after = ''; ;) {
        const page = await kind.heldPage(after, AUDIT_PAGE);
        if (page.length === 0) break;
        after = page.at(-1)!.multihash;
        f.checked('heldContent', page.length);
        await Promise.all(
          page.map((held) =>
            limit(async () => {
              if (ours(await cluster.allocation(held.cid))) return;
              f.suspect(async () => {
                const stillHeld = (await db.holds.heldAmong([held.multihash])).size > 0;
                const pin = await cluster.allocation(held.cid);
                if (!stillHeld || ours(pin) || reported.has(held.multihash)) return null;
                reported.add(held.multihash);
                if (repair) await requestSync(jobs, held.multihash, held.cid);
                return {
                  kind: 'held-not-pinned',
                  subject: held.cid,
                  detail: `held by a ${kind.kind} record; Cluster ${pin ? 'pins it, not for this service' : 'does not pin it'}`,
                  ...(repair ? { repaired: 'its sync pins it' } : {}),
                };
              });
            }),
          ),
        );
        await f.settle();
        progress();
      }
    }
  }

  /**
   * Every pin of this service's in Cluster is held by a record. One that is not is a stray
   * (pinned-not-held, unpinned by its sync on --repair), unless a restore of the database may
   * have forgotten its record (pinned-after-backup, kept: core/restores.ts). `restores`: read
   * once for the run.
   * Nothing else unpins such a pin behind the audit's back: a sync round runs only for a change
   * of its content (a record's write, a delete, this repair), and the sweep only for content in
   * the change log, which the restore rolled back with the records; the sweep's first rounds
   * after a restore look again at changes logged shortly before the backup, so it keeps these
   * pins by the same rule (activities/holds.ts `resyncIfDifferent`).
   */
  async function pinnedIsHeld(f: Findings, repair: boolean, progress: () => void, restores: RestoreRecord[]): Promise<void> {
    for await (const batch of batches(cluster.eachAllocation(), AUDIT_PAGE)) {
      const pins = batch.filter(ours).flatMap((pin) => {
        const parsed = tryParseCid(pin.cid);
        return parsed ? [{ cid: pin.cid, multihash: parsed.multihash }] : [];
      });
      f.checked('clusterPins', pins.length);
      const held = await db.holds.heldAmong(pins.map((p) => p.multihash));
      for (const pin of pins.filter((p) => !held.has(p.multihash)))
        f.suspect(async () => {
          if ((await db.holds.heldAmong([pin.multihash])).size > 0) return null;
          const now = await cluster.allocation(pin.cid);
          if (!ours(now)) return null;
          const metadata = now!.metadata ?? {};
          const lost = lostByRestore(metadata.at, restores);
          if (lost) return pinnedAfterBackup(pin.cid, metadata, lost);
          if (repair) await requestSync(jobs, pin.multihash, pin.cid);
          return {
            kind: 'pinned-not-held',
            subject: pin.cid,
            detail: 'Cluster pins it for this service; no record holds it',
            ...(repair ? { repaired: 'its sync unpins it' } : {}),
          };
        });
      await f.settle();
      progress();
    }
  }

  /** Every pin of Cluster's is pinned on its peers' IPFS nodes: Cluster compares its state
   * with each node's pins and says where they differ. */
  async function clusterMatchesKubo(f: Findings, repair: boolean): Promise<void> {
    for await (const status of cluster.eachStatus(['error', 'unexpectedly_unpinned'])) {
      if (!ours(await cluster.allocation(status.cid))) continue;
      const peers = Object.values(status.peer_map ?? {})
        .map((p) => `${p.peername ?? 'peer'}: ${p.status}${p.error ? ` (${p.error})` : ''}`)
        .join(', ');
      if (repair) await cluster.recover(status.cid);
      f.found({
        kind: 'cluster-not-in-kubo',
        subject: status.cid,
        detail: `Cluster pins it; its IPFS node does not (${peers})`,
        ...(repair ? { repaired: 'Cluster recovers it (pins it in the node again)' } : {}),
      });
    }
  }

  /** Every recursive pin of Kubo's is one of Cluster's (anything else is stored, and never
   * released, outside the service's accounts). A Cluster peer killed after it dropped a pin
   * from its state and before it unpinned it in Kubo leaves one; --repair unpins it in Kubo
   * when no record holds the content (the node is the service's own: docs/limits.md). */
  async function kuboMatchesCluster(f: Findings, repair: boolean, progress: () => void): Promise<void> {
    for await (const listed of batches(kubo.pin.ls({ type: 'recursive' }), AUDIT_PAGE)) {
      const batch = listed.filter((pin) => tryParseCid(pin.cid.toString())?.multihash !== EMPTY_DIRECTORY);
      f.checked('kuboPins', batch.length);
      await Promise.all(
        batch.map((pin) =>
          limit(async () => {
            const cid = pin.cid.toString();
            if (await cluster.allocation(cid)) return;
            f.suspect(async () => {
              if (await cluster.allocation(cid)) return null;
              const multihash = tryParseCid(cid)?.multihash;
              const held = multihash !== undefined && (await db.holds.heldAmong([multihash])).size > 0;
              // Held content is pinned in Cluster by the held-not-pinned repair, which adopts this pin.
              const unpin = repair && multihash !== undefined && !held;
              if (unpin) await kubo.pin.rm(cid).catch(() => undefined);
              return {
                kind: 'kubo-pin-unknown-to-cluster',
                subject: cid,
                detail: `Kubo pins it recursively; Cluster does not${held ? ' (a record holds it)' : ''}`,
                ...(unpin ? { repaired: 'unpinned in Kubo' } : {}),
              };
            });
          }),
        ),
      );
      await f.settle();
      progress();
    }
  }

  return async function auditContent(repair: boolean, progress: () => void): Promise<AuditPart> {
    const f = createFindings();
    await heldIsPinned(f, repair, progress);
    await pinnedIsHeld(f, repair, progress, await db.restores.all());
    await clusterMatchesKubo(f, repair);
    await kuboMatchesCluster(f, repair, progress);
    return f.part;
  };
}
