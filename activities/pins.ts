// Activities of the pin workflow: status bookkeeping in MongoDB, asking Cluster to pin, and
// waiting for Cluster to report the content pinned while the origins are dialled.
import { Context } from '@temporalio/activity';
import { multiaddr } from '@multiformats/multiaddr';
import { ORIGIN_REDIAL_MAX_MS, ORIGIN_REDIAL_MIN_MS, PIN_POLL_MS, QUICK_PIN_WAIT_MS } from '../infra/constants.js';
import { userOfContentKey } from '../infra/db/by-id.js';
import { pinJobInput } from '../infra/db/pins.js';
import { announceHoldChange, pinnedPeers } from '../infra/hold-sync.js';
import { contentSize as kuboContentSize } from '../infra/kubo.js';
import { pinJob } from '../infra/temporal/contracts/pins.js';
import { createClusterPinner } from '../infra/hold-sync.js';
import { pinEvent, recordEvent } from '../infra/webhooks/events.js';
import type { ActivityDeps } from './deps.js';

/** Which request: its record's `_id` and its request ID (a later request may reuse the `_id`). */
export interface PinRef {
  key: string;
  requestId: string;
}

export type PinOutcome =
  /** `completed`: marked pinned and counted already (beginPin does it for content pinned at once). */
  | { pinned: true; size: number | null; completed?: true }
  | { pinned: false; lastStatus: string; requested: boolean }
  /** The request was deleted or failed meanwhile: nothing more to do. */
  | { gone: true };

/** Retrying `pin_error` pins too often only restarts the fetch; once in a while is enough. */
const RECOVER_EVERY_MS = 30_000;

export function createPinActivities(deps: ActivityDeps) {
  const { db, kubo, cluster, jobs, config, logger } = deps;
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
          logger.debug({ origin, err: err.message }, 'origin not reachable yet');
        }),
      ),
    );
  }

  /**
   * Asks Cluster to pin, then checks that the request still holds the content; if it was
   * deleted or failed meanwhile, the content is unpinned unless someone else holds it
   * (infra/hold-sync.ts, activities/holds.ts). Throws when Cluster is unreachable.
   */
  async function requestClusterPin(input: PinRef & { cid: string; multihash: string; origins: string[] }): Promise<'requested' | 'gone'> {
    // Logged first, as every hold's change is (infra/hold-sync.ts): the sweep then checks this
    // content again, and finds a pin that a crashed Cluster forgot (HOLD_CHANGE_RECHECK_MS).
    await db.holdChanges.append(input.multihash, input.cid);
    await clusterPin(input.cid, input.origins);
    const pin = await db.pins.get(input.key);
    if (pin && pin.requestId === input.requestId && pin.status !== 'failed') return 'requested';
    await announceHoldChange(deps, input.multihash, input.cid);
    return 'gone';
  }

  /** Cluster's view: pinned, or the statuses it reports (and recovers a pin in error). */
  async function clusterStatus(cid: string, recover: boolean): Promise<{ pinned: boolean; status: string; error: boolean }> {
    const { pinned: peers, statuses } = await pinnedPeers(cluster, cid);
    const pinned = peers >= needed;
    const error = statuses.includes('pin_error');
    if (!pinned && error && recover) await cluster.recover(cid);
    return { pinned, status: statuses.join(', ') || 'no peers', error };
  }

  /** Asks Cluster to pin and waits up to QUICK_PIN_WAIT_MS for it to report the content pinned. */
  async function quickPin(input: PinRef & { cid: string; multihash: string; origins: string[] }): Promise<PinOutcome> {
    if (input.origins.length > 0) await dial(input.origins);
    try {
      if ((await requestClusterPin(input)) === 'gone') return { gone: true };
    } catch (err) {
      return { pinned: false, requested: false, lastStatus: `cluster unreachable (${(err as Error).message})` };
    }
    let lastStatus = 'not yet known';
    const until = Date.now() + QUICK_PIN_WAIT_MS;
    for (let wait = 20; Date.now() < until; wait = Math.min(wait * 2, 250)) {
      await new Promise((r) => setTimeout(r, wait));
      try {
        const s = await clusterStatus(input.cid, false);
        if (s.pinned) return { pinned: true, size: await contentSize(input.cid) };
        lastStatus = s.status;
        if (s.error) break;
      } catch (err) {
        lastStatus = `cluster unreachable (${(err as Error).message})`;
        break;
      }
    }
    return { pinned: false, requested: true, lastStatus };
  }

  /** Marks the request `pinned` and counts it as a hold of the user's storage, once: only
   * the call that made the transition counts it (a delete releases what it removed), and
   * content the user holds already (uploaded as a file) adds nothing (infra/db/usage.ts). */
  async function completePin(input: PinRef & { size: number | null; cid?: string; multihash?: string }): Promise<void> {
    const userId = userOfContentKey(input.key);
    await db.usage.ensure(userId); // before the record changes (infra/db/usage.ts)
    // Logged with the counters it moves, for the sweep (activities/counts.ts). (A workflow
    // started before this was logged passes no CID: it is counted as before.)
    if (input.cid && input.multihash) await db.holdChanges.append(input.multihash, input.cid, { userId });
    let pinned = await db.pins.markPinned(input.key, input.requestId, input.size);
    if (!pinned) {
      // A retry of this step after a worker died between the two writes (measured by npm run
      // chaos): the request is pinned, and maybe not counted. A user has one request per
      // content, so a holding document that counts no pin says this one never was.
      const current = await db.pins.get(input.key);
      if (current?.requestId !== input.requestId || current.status !== 'pinned') return;
      if (((await db.usage.holding(userId, current.multihash))?.pin ?? 0) > 0) return;
      pinned = current;
    }
    const held = await db.usage.hold(userId, pinned.multihash, 'pin', pinned.size ?? 0);
    await db.activity.tryRecord(userId, Date.now(), { storedBytes: held.used });
    await recordEvent(deps, userId, pinEvent('pin.pinned', pinned));
  }

  return {
    /**
     * The pin's first step, run as a local activity: dials the origins, asks Cluster to pin,
     * and waits briefly. Content that is already local is usually pinned by then, so the whole
     * pin takes one workflow task and goes from `queued` to `pinned`; otherwise it is marked
     * `pinning` and the workflow goes on to the long wait. A Cluster outage is not an error
     * here: the long wait retries the request.
     */
    async beginPin(input: PinRef & { cid: string; multihash: string; origins: string[] }): Promise<PinOutcome> {
      const outcome = await quickPin(input);
      if ('pinned' in outcome && outcome.pinned) {
        // Completed here rather than in a step of its own: a local activity fewer per pin (a
        // workflow activation, a marker in its history and the worker's share of both).
        await completePin({ ...input, size: outcome.size });
        return { ...outcome, completed: true };
      }
      // Marked only when it is not pinned yet: a write fewer for content that is local.
      if ('pinned' in outcome && !outcome.pinned && !(await db.pins.setStatus(input.key, input.requestId, 'pinning')))
        return { gone: true };
      return outcome;
    },

    /**
     * Waits until Cluster reports the content pinned, or the deadline passes. Asks Cluster to
     * pin until it could (`requested`), dials the origins again with backoff while the content
     * is being fetched, asks Cluster to recover a pin in error, and outlives Kubo and Cluster
     * outages (it keeps polling). It heartbeats, so Temporal notices a dead worker and runs it
     * again elsewhere.
     */
    async awaitClusterPin(
      input: PinRef & { cid: string; multihash: string; origins: string[]; deadline: number; requested: boolean },
    ): Promise<PinOutcome> {
      const ctx = Context.current();
      let requested = input.requested;
      let lastStatus = 'not yet known';
      let nextDial = 0;
      let dialDelay = ORIGIN_REDIAL_MIN_MS;
      let lastRecover = 0;
      for (;;) {
        const now = Date.now();
        if (now >= input.deadline) return { pinned: false, requested, lastStatus };
        if (input.origins.length > 0 && now >= nextDial) {
          await dial(input.origins);
          nextDial = Date.now() + dialDelay;
          dialDelay = Math.min(dialDelay * 2, ORIGIN_REDIAL_MAX_MS);
        }
        try {
          if (!requested) {
            if ((await requestClusterPin(input)) === 'gone') return { gone: true };
            requested = true;
          }
          const recover = now - lastRecover > RECOVER_EVERY_MS;
          const s = await clusterStatus(input.cid, recover);
          if (s.pinned) {
            const size = await contentSize(input.cid);
            await completePin({ ...input, size }); // as beginPin does
            return { pinned: true, size, completed: true };
          }
          if (s.error && recover) lastRecover = now;
          lastStatus = s.status;
        } catch (err) {
          lastStatus = `cluster unreachable (${(err as Error).message})`;
        }
        ctx.heartbeat(lastStatus);
        await ctx.sleep(PIN_POLL_MS);
      }
    },

    completePin,

    /**
     * Sweep: starts the workflow of requests left `queued` for a minute (Temporal was down when
     * they were made). A workflow that runs is left as it is.
     */
    async resumeStalledPins(): Promise<number> {
      const stalled = await db.pins.stalled(Date.now() - 60_000, 500);
      for (const pin of stalled) await jobs.start(pinJob, pinJobInput(pin));
      return stalled.length;
    },

    /** Ends the request `failed`, which no longer holds the content, so Cluster stops trying to fetch. */
    async failPin(input: PinRef & { multihash: string; cid: string; error: { reason: string; details: string } }): Promise<void> {
      const failed = await db.pins.markFailed(input.key, input.requestId, input.error);
      await announceHoldChange(deps, input.multihash, input.cid);
      if (failed) await recordEvent(deps, failed.userId, pinEvent('pin.failed', failed));
    },
  };
}
