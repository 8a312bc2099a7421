// Where a content is, peer by peer, as IPFS Cluster reports it: the `peers` of GET /pin/:cid.
// Its own module, as a component the server builds once (deps.ts), apart from the pin use-cases.
import type { ParsedCid } from '../infra/ipfs/cid.js';
import type { ClusterClient } from '../infra/ipfs/cluster.js';
import { PEERS_MEMORY_MS, PEERS_TIMEOUT_MS } from '../infra/constants.js';

/** One Cluster peer's state of a content: `pinned`, `pinning`, `pin_queued`, `remote` (allocated
 * to other peers), `pin_error`, `cluster_error` (the peer does not answer), … */
export interface PeerState {
  peer: string;
  name: string;
  status: string;
}

/** Cluster's states a content stays in until something is done to it. */
const SETTLED = new Set(['pinned', 'remote']);

/**
 * Where the content is, peer by peer, as Cluster reports it; null when Cluster does not answer
 * within PEERS_TIMEOUT_MS (the request's own state, from MongoDB, is the answer that counts).
 * Asked of Cluster for each GET /pin/:cid, where clients poll: 100 of them polling a pinned CID
 * had Cluster answer 1,900 status calls a second, at 0.15 of the rate the API answers without
 * them. So asks made while a call is under way share it, and a settled view (every peer `pinned` or `remote`)
 * is answered again for PEERS_MEMORY_MS; a view in motion is asked again each time.
 */
export function createContentPeers(cluster: ClusterClient) {
  const kept = new Map<string, { states: PeerState[]; until: number }>();
  const asking = new Map<string, Promise<PeerState[] | null>>();
  const ask = async (cid: string): Promise<PeerState[] | null> => {
    try {
      const info = await cluster.status(cid, { signal: AbortSignal.timeout(PEERS_TIMEOUT_MS) });
      return Object.entries(info.peer_map ?? {})
        .map(([peer, state]) => ({ peer, name: state.peername ?? '', status: state.status }))
        .sort((a, b) => a.name.localeCompare(b.name) || a.peer.localeCompare(b.peer));
    } catch {
      return null;
    } finally {
      asking.delete(cid);
    }
  };
  return {
    async of(cid: ParsedCid): Promise<PeerState[] | null> {
      const asked = performance.now();
      const hit = kept.get(cid.v1);
      if (hit && hit.until > asked) return hit.states;
      // A call under way answers those who ask meanwhile: it was sent a moment ago at most.
      let call = asking.get(cid.v1);
      if (!call) asking.set(cid.v1, (call = ask(cid.v1)));
      const states = await call;
      if (states && states.length > 0 && states.every((s) => SETTLED.has(s.status))) {
        if (kept.size >= 10_000) kept.clear(); // a bound, not an eviction policy
        kept.set(cid.v1, { states, until: asked + PEERS_MEMORY_MS });
      } else kept.delete(cid.v1);
      return states;
    },
  };
}

export type ContentPeers = ReturnType<typeof createContentPeers>;
