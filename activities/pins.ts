// Activities of the pin workflow: status bookkeeping in MongoDB, asking Cluster to pin, and
// waiting for Cluster to report the content pinned while the origins are dialled. The steps
// themselves are shared with the API, which pins content Kubo already has inline
// (core/pin-steps.ts).
import { Context } from '@temporalio/activity';
import { ORIGIN_REDIAL_MAX_MS, ORIGIN_REDIAL_MIN_MS, PIN_POLL_MS, PIN_STALLED_MS, QUICK_PIN_WAIT_MS } from '../infra/constants.js';
import { pinJobInput } from '../infra/db/pins.js';
import { announceHoldChange } from '../core/hold-sync.js';
import { createPinSteps, type PinContent, type PinRef } from '../core/pin-steps.js';
import { pinJob } from '../infra/temporal/contracts/pins.js';
import { pinEvent, recordEvent } from '../core/webhook-events.js';
import type { ActivityDeps } from './deps.js';

export type PinOutcome =
  /** `completed`: marked pinned and counted already (beginPin does it for content pinned at once). */
  | { pinned: true; size: number | null; completed?: true }
  | { pinned: false; lastStatus: string; requested: boolean }
  /** The request was deleted or failed meanwhile: nothing more to do. */
  | { gone: true };

/** Retrying `pin_error` pins too often only restarts the fetch; once in a while is enough. */
const RECOVER_EVERY_MS = 30_000;

export function createPinActivities(deps: ActivityDeps) {
  const { db, jobs } = deps;
  const steps = createPinSteps(deps);
  const { contentSize, dial, requestClusterPin, clusterStatus } = steps;
  const completePin = async (input: Parameters<typeof steps.completePin>[0]): Promise<void> => {
    await steps.completePin(input);
  };

  /** Asks Cluster to pin and waits up to QUICK_PIN_WAIT_MS for it to report the content pinned. */
  async function quickPin(input: PinContent): Promise<PinOutcome> {
    if (input.origins.length > 0) await dial(input.origins);
    try {
      if ((await requestClusterPin(input)) === 'gone') return { gone: true };
    } catch (err) {
      return { pinned: false, requested: false, lastStatus: `cluster unreachable (${(err as Error).message})` };
    }
    const { pinned, lastStatus } = await steps.awaitPinned(input.cid, QUICK_PIN_WAIT_MS);
    if (pinned) return { pinned: true, size: await contentSize(input.cid) };
    return { pinned: false, requested: true, lastStatus };
  }

  return {
    /**
     * The pin's first step, run as a local activity: dials the origins, asks Cluster to pin,
     * and waits briefly. Content that is local by then (the API pins content that was local when
     * it was asked inline, and starts this only for the rest) is usually pinned, so the whole
     * pin takes one workflow task and goes from `queued` to `pinned`; otherwise it is marked
     * `pinning` and the workflow goes on to the long wait. A Cluster outage is not an error
     * here: the long wait retries the request.
     */
    async beginPin(input: PinContent): Promise<PinOutcome> {
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
    async awaitClusterPin(input: PinContent & { deadline: number; requested: boolean }): Promise<PinOutcome> {
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
     * Sweep: starts the workflow of requests left `queued` for PIN_STALLED_MS (Temporal was down
     * when they were made, or the API died pinning one inline). A workflow that runs is left as
     * it is.
     */
    async resumeStalledPins(): Promise<number> {
      const stalled = await db.pins.stalled(Date.now() - PIN_STALLED_MS, 500);
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
