// How every change of holds is announced: appended to the change log first, then made good in
// IPFS Cluster. The order is the point: whatever fails after the log entry (a process dying,
// Cluster or Temporal down), the next sweep round (activities/holds.ts) checks that content
// and asks for the sync it needs.
//
// Two ways to make it good:
// - A record that was added (`added`), announced by a process that has Cluster at hand (the
//   API, a worker), is pinned inline: Cluster is asked to pin, then the record is read again,
//   and if it is gone already the content's sync workflow gets a full round. That is the rule
//   every pinner follows (activities/holds.ts argues why it is race-free), and it spares an
//   upload a workflow round trip: Temporal ran about 22 empty workflows/s on the two-core
//   machine the bench runs on, so one workflow per small upload capped uploads there.
// - Anything else (a removal, or an added record when Cluster fails) signals the content's
//   sync workflow (infra/temporal/contracts/holds.ts), as before.
import type { ClusterClient } from './cluster.js';
import { REPLICATION_WAIT_MS } from './constants.js';
import type { Config } from './config.js';
import type { Database } from './db/index.js';
import { requestSync, type HolderRef } from './temporal/contracts/holds.js';
import type { Jobs } from './temporal/jobs.js';

/** Cluster pins made by this service carry this metadata, so the sweep never touches others'. */
export const PIN_METADATA = { service: 'stupa' };

/** `here`: the content was just added through this process's Kubo, the one its Cluster peer
 * drives: with replication factors and CLUSTER_ALLOCATE_LOCAL, that peer is allocated first (it
 * has the blocks already), and the other peers fetch from it. */
export type ClusterPinner = (cid: string, origins: string[], options?: { here?: boolean }) => Promise<void>;

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
  return async (cid, origins, options = {}) =>
    cluster.pin(cid, {
      replicationMin,
      replicationMax,
      origins,
      metadata: PIN_METADATA,
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
  /** With these, an added record is pinned inline rather than through its sync workflow. */
  cluster?: ClusterClient;
  config?: Pick<Config, 'cluster'>;
}

export async function announceHoldChange(
  deps: HoldSyncDeps,
  multihash: string,
  cid: string,
  added?: HolderRef,
  options: { logged?: boolean } = {},
): Promise<void> {
  // `logged`: the caller appended it before writing the record (api/usecases/uploads.ts).
  if (!options.logged) await deps.db.holdChanges.append(multihash, cid);
  const { cluster, config } = deps;
  if (added && cluster && config && (await pinAdded(deps, createClusterPinner({ cluster, config }), multihash, cid, added))) return;
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
 * if it was removed meanwhile, its removal's full round may have run before this pin, so a
 * full round is asked for again (it unpins unless someone else holds the content). False when
 * Cluster or the read failed: the caller falls back to the sync workflow, which retries.
 */
async function pinAdded(deps: HoldSyncDeps, pin: ClusterPinner, multihash: string, cid: string, added: HolderRef): Promise<boolean> {
  let held;
  try {
    await pin(cid, [], { here: true });
    held = await deps.db.holds.holds(added);
  } catch {
    return false;
  }
  // Answered once the replication minimum holds it (a single peer: at once, it added the
  // content), or REPLICATION_WAIT_MS has passed: Cluster goes on replicating either way.
  const needed = deps.config!.cluster.replicationMin;
  if (held && needed > 1) await awaitReplicas(deps.cluster!, cid, needed);
  // Temporal unreachable: the logged change is the sweep's (as in announceHoldChange).
  if (!held) await requestSync(deps.jobs, multihash, cid).catch(() => undefined);
  // A kind with origins (none today: pin requests pin through their own workflow) gets them.
  else if (held.origins.length > 0) await requestSync(deps.jobs, multihash, cid, added).catch(() => undefined);
  return true;
}

/**
 * For a holder kind with no origins (an IPNS name): announces the change only when it can
 * change Cluster's pin, that is when no other record holds the content. Called after the change
 * is written, so it is race-free by the order of writes and reads: of two records leaving the
 * same content at once, each removes itself before it looks, so the later look sees neither and
 * announces; a record added beside another one is seen by that one's later removal round,
 * which then keeps the pin. Saves a sync workflow round per publish where the old and new
 * targets are held otherwise (by their uploads), as they usually are.
 */
export async function announceHoldChangeIfAlone(
  deps: HoldSyncDeps,
  multihash: string,
  cid: string,
  self: HolderRef,
  change: 'added' | 'removed',
): Promise<void> {
  if (await deps.db.holds.heldByOthers(multihash, self)) return;
  await announceHoldChange(deps, multihash, cid, change === 'added' ? self : undefined);
}
