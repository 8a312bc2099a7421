// Activities of the pin workflow: status bookkeeping in MongoDB, and the long wait for
// Cluster to report the content pinned while the origins are dialled.
import { Context } from '@temporalio/activity';
import { multiaddr } from '@multiformats/multiaddr';
import { ORIGIN_REDIAL_MAX_MS, ORIGIN_REDIAL_MIN_MS, PIN_POLL_MS } from '../infra/constants.js';
import type { ActivityDeps } from './index.js';

export type PinOutcome = { pinned: true; size: number | null } | { pinned: false; lastStatus: string };

/** Retrying `pin_error` pins too often only restarts the fetch; once in a while is enough. */
const RECOVER_EVERY_MS = 30_000;

export function createPinActivities({ db, kubo, cluster, jobs, config, logger }: ActivityDeps) {
  /** Pinned once at least `replicationMin` peers (at least one) report it pinned. */
  const needed = Math.max(1, config.cluster.replicationMin);

  async function contentSize(cid: string): Promise<number | null> {
    try {
      const stat = await kubo.files.stat(`/ipfs/${cid}`, { signal: AbortSignal.timeout(10_000) });
      return Number(stat.type === 'directory' ? stat.cumulativeSize : stat.size);
    } catch {
      return null;
    }
  }

  async function dial(origins: string[]): Promise<void> {
    await Promise.all(
      origins.map((origin) =>
        kubo.swarm.connect(multiaddr(origin), { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => {
          logger.debug({ origin, err: err.message }, 'origin not reachable yet');
        }),
      ),
    );
  }

  return {
    async setPinStatus(input: { requestId: string; status: 'pinning' }): Promise<void> {
      await db.pins.setStatus(input.requestId, input.status);
    },

    /**
     * Waits until Cluster reports the content pinned, or the deadline passes. Dials the
     * origins at once and again with backoff while the content is being fetched; asks Cluster
     * to recover a pin in error; outlives Kubo and Cluster outages (it keeps polling). It
     * heartbeats, so Temporal notices a dead worker and runs it again elsewhere.
     */
    async awaitClusterPin(input: { cid: string; origins: string[]; deadline: number }): Promise<PinOutcome> {
      const ctx = Context.current();
      let lastStatus = 'not yet known';
      let nextDial = 0;
      let dialDelay = ORIGIN_REDIAL_MIN_MS;
      let lastRecover = 0;
      for (;;) {
        const now = Date.now();
        if (now >= input.deadline) return { pinned: false, lastStatus };
        if (input.origins.length > 0 && now >= nextDial) {
          await dial(input.origins);
          nextDial = Date.now() + dialDelay;
          dialDelay = Math.min(dialDelay * 2, ORIGIN_REDIAL_MAX_MS);
        }
        try {
          const info = await cluster.status(input.cid, { signal: AbortSignal.timeout(10_000) });
          const statuses = Object.values(info.peer_map ?? {}).map((p) => p.status);
          if (statuses.filter((s) => s === 'pinned').length >= needed) return { pinned: true, size: await contentSize(input.cid) };
          lastStatus = statuses.join(', ') || 'no peers';
          if (statuses.includes('pin_error') && now - lastRecover > RECOVER_EVERY_MS) {
            lastRecover = now;
            await cluster.recover(input.cid);
          }
        } catch (err) {
          lastStatus = `cluster unreachable (${(err as Error).message})`;
        }
        ctx.heartbeat(lastStatus);
        await ctx.sleep(PIN_POLL_MS);
      }
    },

    async completePin(input: { requestId: string; userId: string; size: number | null }): Promise<void> {
      await db.pins.markPinned(input.requestId, input.size);
    },

    /**
     * Sweep: starts the workflow of requests left `queued` for a minute (Temporal was down when
     * they were made). A workflow that runs is left as it is.
     */
    async resumeStalledPins(): Promise<number> {
      const stalled = await db.pins.stalled(Date.now() - 60_000, 500);
      for (const p of stalled) {
        await jobs.startPin(
          { requestId: p._id, userId: p.userId, cid: p.cid, multihash: p.multihash, origins: p.origins, deadline: p.deadline },
          false,
        );
      }
      return stalled.length;
    },

    /** Ends the request `failed`, which no longer holds the content, so Cluster stops trying to fetch. */
    async failPin(input: { requestId: string; multihash: string; cid: string; error: { reason: string; details: string } }): Promise<void> {
      await db.pins.markFailed(input.requestId, input.error);
      await jobs.requestSync(input.multihash, input.cid);
    },
  };
}
