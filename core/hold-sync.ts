// How every change of holds is announced: appended to the change log first, then made good in
// IPFS Cluster. The order is the point: whatever fails after the log entry (a process dying,
// Cluster or Temporal down), the next sweep round (activities/holds.ts) checks that content
// and asks for the sync it needs.
//
// A process that has Cluster at hand (the API, a worker) makes it good inline:
// - a record that was added (`added`) is pinned, then the record is read again, and if it is
//   gone already the content is unpinned unless another record holds it;
// - a removal is nothing to do while another record holds the content; otherwise the content is
//   unpinned, and the holds read again (pinned back by a full round if a record came meanwhile).
// Every pin and unpin is confirmed by a read after it: that is the rule that makes the rounds of
// every process race-free together (activities/holds.ts argues it). Inline, an upload and a
// delete each spare a workflow: Temporal ran about 22 empty workflows/s on the two-core machine
// the bench runs on, and a delete's sync workflow cost Temporal 14.5 ms of CPU.
// When Cluster or MongoDB fails, the change goes to the content's sync workflow
// (infra/temporal/contracts/holds.ts), which retries.
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import { REPLICATION_WAIT_MS, SYNC_ROUNDS } from '../infra/constants.js';
import type { Config } from '../infra/config.js';
import type { Database } from '../infra/db/index.js';
import { requestSync, type HolderRef } from '../infra/temporal/contracts/holds.js';
import type { Jobs } from '../infra/temporal/jobs.js';

/** Cluster pins made by this service carry this metadata, so the sweep never touches others'. */
export const PIN_METADATA = { service: 'stupa' };

/** Whom a pin is made for: the account and its record that holds the content (`<kind>:<id>`,
 * as `db.holds.of` names holders). */
export interface PinFor {
  account: string;
  record: string;
}

/**
 * The metadata of a pin of ours: the service, and whom and when (`at`, ms since epoch: Cluster's
 * metadata values are strings) it was pinned for. A MongoDB restored from a backup forgets the
 * records written after it, not their pins: the audit keeps a pin no record holds when its `at`
 * falls between a backup and its restore (activities/audit/content.ts), and the account and
 * record tell the operator whose it is.
 * Measured against Cluster v1.1.6: pinning a CID it pins already, with other metadata, replaces
 * the metadata whole (GET /allocations/<cid> shows the new keys, none of the old ones kept; the
 * pin's timestamp and status unchanged; about 10 ms on loopback), and the same metadata again
 * changes nothing. So a re-pin for a newer record (a sync round, a second upload of the content)
 * moves `at` forward, and the last pin's record is the one named. As `at` differs each time, a
 * re-pin is now a write of Cluster's state where an identical one was none: re-pins come only
 * from sync rounds and content added again, a few per change.
 */
export function pinMetadata(pinFor: PinFor, at = Date.now()): Record<string, string> {
  return { ...PIN_METADATA, account: pinFor.account, record: pinFor.record, at: String(at) };
}

/** `here`: the content was just added through this process's Kubo, the one its Cluster peer
 * drives: with replication factors and CLUSTER_ALLOCATE_LOCAL, that peer is allocated first (it
 * has the blocks already), and the other peers fetch from it. */
export type ClusterPinner = (cid: string, origins: string[], pinFor: PinFor, options?: { here?: boolean }) => Promise<void>;

/** Each Cluster REST API's own peer ID, asked once (again after a failure). */
const peerIds = new WeakMap<ClusterClient, Promise<string>>();
function ownPeerId(cluster: ClusterClient): Promise<string> {
  let id = peerIds.get(cluster);
  if (!id) {
    id = cluster.id().then((peer) => peer.id);
    id.catch(() => peerIds.delete(cluster));
    peerIds.set(cluster, id);
  }
  return id;
}

/** Pins in Cluster as this service does: its replication factors and its metadata. */
export function createClusterPinner({ cluster, config }: { cluster: ClusterClient; config: Pick<Config, 'cluster'> }): ClusterPinner {
  const { replicationMin, replicationMax, allocateLocal } = config.cluster;
  // -1/-1 pins on every peer: there is nothing to choose.
  const local = allocateLocal && !(replicationMin === -1 && replicationMax === -1);
  return async (cid, origins, pinFor, options = {}) =>
    cluster.pin(cid, {
      replicationMin,
      replicationMax,
      origins,
      metadata: pinMetadata(pinFor),
      ...(options.here && local ? { allocations: [await ownPeerId(cluster)] } : {}),
    });
}

/** How many peers Cluster reports the content pinned on, and every peer's status. */
export async function pinnedPeers(
  cluster: ClusterClient,
  cid: string,
  signal?: AbortSignal,
): Promise<{ pinned: number; statuses: string[] }> {
  const info = await cluster.status(cid, { signal: signal ?? AbortSignal.timeout(10_000) });
  const statuses = Object.values(info.peer_map ?? {}).map((p) => p.status);
  return { pinned: statuses.filter((s) => s === 'pinned').length, statuses };
}

/**
 * Waits until `needed` peers report the content pinned, up to REPLICATION_WAIT_MS; true when
 * they do. Polled from 20 ms up, doubling to 250 ms: a replica on a peer of the same network
 * took about 60 ms (measured on loopback).
 */
async function awaitReplicas(cluster: ClusterClient, cid: string, needed: number): Promise<boolean> {
  const until = Date.now() + REPLICATION_WAIT_MS;
  for (let wait = 20; ; wait = Math.min(wait * 2, 250)) {
    const { pinned, statuses } = await pinnedPeers(cluster, cid).catch(() => ({ pinned: 0, statuses: [] as string[] }));
    if (pinned >= needed) return true;
    if (statuses.includes('pin_error') || Date.now() + wait > until) return false;
    await new Promise((r) => setTimeout(r, wait));
  }
}

export interface HoldSyncDeps {
  db: Pick<Database, 'holdChanges' | 'holds'>;
  jobs: Jobs;
  /** With these, the change is made good inline rather than through its sync workflow. */
  cluster?: ClusterClient;
  config?: Pick<Config, 'cluster'>;
}

/** What a round inline needs: the holds, Cluster, and how this service pins. */
export interface SyncDeps {
  db: Pick<Database, 'holds'>;
  cluster: ClusterClient;
  pin: ClusterPinner;
}

/**
 * A full round: pins when any record holds the content, unpins when none does, then reads the
 * holds again and goes again while they disagree with what it did. The only way content leaves
 * Cluster's pin set.
 */
export async function syncHolds(deps: SyncDeps, multihash: string, cid: string): Promise<'pinned' | 'unpinned'> {
  for (let round = 1; ; round++) {
    const holds = await deps.db.holds.of(multihash);
    const { newest } = holds;
    if (newest) await deps.pin(holds.cid ?? cid, holds.origins, { account: newest.userId, record: newest.holder });
    else await deps.cluster.unpin(cid);
    const held = newest !== undefined;
    if ((await deps.db.holds.isHeld(multihash)) === held) return held ? 'pinned' : 'unpinned';
    if (round === SYNC_ROUNDS) throw new Error(`the holds of ${cid} changed through ${SYNC_ROUNDS} rounds`);
  }
}

/** A record just added, with whose it is: its pin is made before it is read again. */
export type AddedHolder = HolderRef & { userId: string };

export async function announceHoldChange(
  deps: HoldSyncDeps,
  multihash: string,
  cid: string,
  added?: AddedHolder,
  options: { logged?: boolean } = {},
): Promise<void> {
  // `logged`: the caller appended it before writing the record (core/uploads.ts).
  if (!options.logged) await deps.db.holdChanges.append(multihash, cid);
  const { cluster, config } = deps;
  if (cluster && config) {
    const inline: SyncDeps = { db: deps.db, cluster, pin: createClusterPinner({ cluster, config }) };
    try {
      if (added) await pinAdded(deps, inline, multihash, cid, added);
      else await unpinIfUnheld(inline, multihash, cid);
      return;
    } catch {
      // Cluster or MongoDB failed: the sync workflow retries.
    }
  }
  try {
    await requestSync(deps.jobs, multihash, cid, added);
  } catch {
    // Temporal unreachable. The change is logged, so the sweep's next round after Temporal is
    // back asks for this sync (activities/holds.ts): the change the caller made has happened,
    // and failing its request now would tell the client otherwise (measured by npm run chaos:
    // a delete answered 503 with its record gone).
  }
}

/**
 * Pins content for a record that was just added, then checks that the record still holds it:
 * if it was removed meanwhile, its removal's round may have run before this pin, so the content
 * is unpinned unless someone else holds it.
 */
async function pinAdded(deps: HoldSyncDeps, inline: SyncDeps, multihash: string, cid: string, added: AddedHolder): Promise<void> {
  // Whom for comes from the caller: no read before the pin (the holder kinds' `_id`s are their
  // holder IDs, pin requests, whose are not, announce no `added`).
  await inline.pin(cid, [], { account: added.userId, record: `${added.kind}:${added.key}` }, { here: true });
  const held = await deps.db.holds.holds(added);
  if (!held) {
    await unpinIfUnheld(inline, multihash, cid);
    return;
  }
  // Answered once the replication minimum holds it (a single peer: at once, it added the
  // content), or REPLICATION_WAIT_MS has passed: Cluster goes on replicating either way.
  const needed = deps.config!.cluster.replicationMin;
  if (needed > 1) await awaitReplicas(inline.cluster, cid, needed);
  // A kind with origins (none today: pin requests pin through their own steps, core/pin-steps.ts)
  // gets them.
  if (held.origins.length > 0) await requestSync(deps.jobs, multihash, cid, added).catch(() => undefined);
}

/**
 * After a record that held the content went, or a pin was made for one that is gone: nothing to
 * do while another record holds the content (that read confirms any pin made before it, and the
 * record's own removal will have its round); otherwise unpinned, and if a record came between
 * the read and the unpin, pinned back by a full round.
 */
export async function unpinIfUnheld(inline: SyncDeps, multihash: string, cid: string): Promise<void> {
  if (await inline.db.holds.isHeld(multihash)) return;
  await inline.cluster.unpin(cid);
  if (await inline.db.holds.isHeld(multihash)) await syncHolds(inline, multihash, cid);
}

/**
 * For a holder kind with no origins (an IPNS name): announces the change only when it can
 * change Cluster's pin. Called after the change is written:
 * - a removal, when no other record holds the content: of two records leaving the same content
 *   at once, each removes itself before it looks, so the later look sees neither and announces;
 * - an addition, when no record of another kind holds it: those always have their pin made after
 *   their insert. Another record of this kind does not count: two names given the same target
 *   at once would each see the other and neither would pin.
 * Saves a round per publish where the old and new targets are held otherwise (by their uploads),
 * as they usually are.
 */
export async function announceHoldChangeIfAlone(
  deps: HoldSyncDeps,
  multihash: string,
  cid: string,
  self: AddedHolder,
  change: 'added' | 'removed',
): Promise<void> {
  if (await deps.db.holds.heldByOthers(multihash, self, { otherKinds: change === 'added' })) return;
  await announceHoldChange(deps, multihash, cid, change === 'added' ? self : undefined);
}
