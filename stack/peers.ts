// What a stack of several Kubo + Cluster peer pairs needs beyond a stack of one: their ports,
// their names, and the wait until the Cluster peers can allocate pins among all of them.

/** Peer n (counting from 0) of a several-peer stack uses the first peer's ports plus n × this.
 * Step 10 keeps every port of up to MAX_PEERS peers apart from the others' (their offsets
 * differ in the last digit) and within base+1..base+481. */
export const PEER_PORT_STEP = 10;
export const MAX_PEERS = 9;
export const PEER_PORTS = ['kuboApi', 'kuboGateway', 'kuboSwarm', 'clusterApi', 'clusterSwarm'] as const;
export type PeerPorts = Record<(typeof PEER_PORTS)[number], number>;

/** Peer n's directory and log name: kubo and cluster for the first, kubo-2, cluster-2, … after it. */
export const peerName = (piece: 'kubo' | 'cluster', n: number) => (n === 0 ? piece : `${piece}-${n + 1}`);

/**
 * Waits until every Cluster peer of a several-peer stack has every peer's allocation metrics
 * (its informers': `tag:group` and `freespace`): before that, a pin with a replication factor
 * of two or more is refused with "not enough peers to allocate".
 */
export async function waitForPeerset(apiUrls: string[], signal: AbortSignal, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const metrics = ['tag:group', 'freespace'];
  let seen = '';
  for (;;) {
    const counts = await Promise.all(
      apiUrls.flatMap((url) =>
        metrics.map(async (metric) => {
          try {
            const res = await fetch(`${url}/monitor/metrics/${metric}`, { signal: AbortSignal.timeout(5000) });
            const list = (await res.json()) as { peer: string; valid?: boolean }[];
            return new Set(list.filter((m) => m.valid !== false).map((m) => m.peer)).size;
          } catch {
            return 0;
          }
        }),
      ),
    );
    if (counts.every((c) => c === apiUrls.length)) return;
    seen = counts.join(', ');
    if (signal.aborted) throw new Error('stack start aborted while the Cluster peers were meeting');
    if (Date.now() > deadline) {
      throw new Error(
        `the ${apiUrls.length} Cluster peers did not all see each other in ${timeoutMs} ms (peers with metrics, by peer and metric: ${seen})`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}
