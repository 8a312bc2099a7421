// The steps of a pin request, shared by the two places that take a request to `pinned`: the API,
// which pins content Kubo already has inline (core/pins.ts), and the pin workflow's
// activities (activities/pins.ts), which do everything else. Each step checks the request it
// acts for by its request ID, so the two (or a retried step) never count a pin twice.
import { multiaddr } from '@multiformats/multiaddr';
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import type { Config } from '../infra/config.js';
import { userOfContentKey } from '../infra/db/by-id.js';
import type { Database } from '../infra/db/index.js';
import type { PinRecord } from '../infra/db/pins.js';
import { announceHoldChange, createClusterPinner, pinnedPeers } from './hold-sync.js';
import { contentSize as kuboContentSize, type Kubo } from '../infra/ipfs/kubo.js';
import type { Logger } from '../infra/logger.js';
import type { Jobs } from '../infra/temporal/jobs.js';
import { pinEvent, recordEvent } from './webhook-events.js';

/** Which request: its record's `_id` and its request ID (a later request may reuse the `_id`). */
export interface PinRef {
  key: string;
  requestId: string;
}

/** A request and the content it pins. */
export type PinContent = PinRef & { cid: string; multihash: string; origins: string[] };

export interface PinStepDeps {
  config: Config;
  db: Database;
  kubo: Kubo;
  cluster: ClusterClient;
  jobs: Jobs;
  logger?: Logger;
}

/** Cluster's view of the content: pinned on enough peers, or the statuses it reports. */
export interface ClusterView {
  pinned: boolean;
  status: string;
  error: boolean;
}

export function createPinSteps(deps: PinStepDeps) {
  const { db, kubo, cluster, config, logger } = deps;
  const clusterPin = createClusterPinner(deps);
  /** Pinned once at least `replicationMin` peers (at least one) report it pinned. */
  const needed = Math.max(1, config.cluster.replicationMin);

  /** Unknown (null) rather than a failed pin when Kubo cannot tell. */
  const contentSize = (cid: string): Promise<number | null> =>
    kuboContentSize(config.kubo.apiUrl, cid, AbortSignal.timeout(10_000)).catch(() => null);

  async function dial(origins: string[]): Promise<void> {
    await Promise.all(
      origins.map((origin) =>
        kubo.swarm.connect(multiaddr(origin), { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => {
          logger?.debug({ origin, err: err.message }, 'origin not reachable yet');
        }),
      ),
    );
  }

  /**
   * Asks Cluster to pin, then checks that the request still holds the content; if it was
   * deleted or failed meanwhile, the content is unpinned unless someone else holds it
   * (core/hold-sync.ts, activities/holds.ts). Throws when Cluster is unreachable. `here`: the
   * stack's own Kubo has the content (core/hold-sync.ts ClusterPinner).
   */
  async function requestClusterPin(input: PinContent, options: { here?: boolean } = {}): Promise<'requested' | 'gone'> {
    // Logged first, as every hold's change is (core/hold-sync.ts): the sweep then checks this
    // content again, and finds a pin that a crashed Cluster forgot (HOLD_CHANGE_RECHECK_MS).
    await db.holdChanges.append(input.multihash, input.cid);
    await clusterPin(input.cid, input.origins, { account: userOfContentKey(input.key), record: `pin:${input.requestId}` }, options);
    const pin = await db.pins.get(input.key);
    if (pin && pin.requestId === input.requestId && pin.status !== 'failed') return 'requested';
    await announceHoldChange(deps, input.multihash, input.cid);
    return 'gone';
  }

  /** Cluster's view now (and recovers a pin in error when asked). */
  async function clusterStatus(cid: string, recover: boolean, signal?: AbortSignal): Promise<ClusterView> {
    const { pinned: peers, statuses } = await pinnedPeers(cluster, cid, signal);
    const pinned = peers >= needed;
    const error = statuses.includes('pin_error');
    if (!pinned && error && recover) await cluster.recover(cid);
    return { pinned, status: statuses.join(', ') || 'no peers', error };
  }

  /**
   * Polls Cluster for up to `waitMs` until it reports the content pinned, from 20 ms up,
   * doubling to 250 ms; stops early on a pin in error or Cluster unreachable (or slower to
   * answer than the time left).
   */
  async function awaitPinned(cid: string, waitMs: number): Promise<{ pinned: boolean; lastStatus: string }> {
    let lastStatus = 'not yet known';
    const until = Date.now() + waitMs;
    for (let wait = 20; Date.now() < until; wait = Math.min(wait * 2, 250)) {
      await new Promise((r) => setTimeout(r, wait));
      try {
        const s = await clusterStatus(cid, false, AbortSignal.timeout(Math.max(until - Date.now(), 100)));
        if (s.pinned) return { pinned: true, lastStatus: s.status };
        lastStatus = s.status;
        if (s.error) break;
      } catch (err) {
        lastStatus = `cluster unreachable (${(err as Error).message})`;
        break;
      }
    }
    return { pinned: false, lastStatus };
  }

  /**
   * Marks the request `pinned` and counts it as a hold of the user's storage, once: only the
   * call that made the transition counts it (a delete releases what it removed), and content the
   * user holds already (uploaded as a file) adds nothing (infra/db/usage.ts). Two callers may
   * race to it (the API pinning inline while a second POST of the request started its
   * workflow), so a caller that finds the request pinned already counts nothing: if the one
   * that marked it died before it counted (measured by npm run chaos), the change logged here
   * first has the sweep recount the user (activities/counts.ts). Returns the pinned request,
   * or null when it is no longer this one, or no longer active.
   */
  async function completePin(input: PinRef & { size: number | null; cid?: string; multihash?: string }): Promise<PinRecord | null> {
    const userId = userOfContentKey(input.key);
    await db.usage.ensure(userId); // before the record changes (infra/db/usage.ts)
    // Logged with the counters it moves, for the sweep. (A workflow started before this was
    // logged passes no CID; the audit finds such a count if its worker died.)
    if (input.cid && input.multihash) await db.holdChanges.append(input.multihash, input.cid, { userId });
    const pinned = await db.pins.markPinned(input.key, input.requestId, input.size);
    if (!pinned) {
      const current = await db.pins.get(input.key);
      return current?.requestId === input.requestId && current.status === 'pinned' ? current : null;
    }
    const held = await db.usage.hold(userId, pinned.multihash, 'pin', pinned.size ?? 0);
    await db.analytics.tryRecord(userId, Date.now(), { storedBytes: held.used });
    await recordEvent(deps, userId, pinEvent('pin.pinned', pinned));
    return pinned;
  }

  return { contentSize, dial, requestClusterPin, clusterStatus, awaitPinned, completePin };
}

export type PinSteps = ReturnType<typeof createPinSteps>;
