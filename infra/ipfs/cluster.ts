// IPFS Cluster REST API client.
//
// Written here instead of using the `ipfs-cluster-api` package: measured against Cluster
// v1.1.6, its 0.0.9 release (2019, callback API) fails on every list call once more than
// one pin exists, because Cluster v1 streams lists as NDJSON while the package parses one
// JSON document, and it reports errors as `[object Object]`. The REST calls needed are few.

import { httpCall, httpLines } from '../http-call.js';

export class ClusterError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ClusterError';
  }
}

export interface ClusterPeer {
  id: string;
  version: string;
  ipfs?: { id?: string; error?: string };
  error?: string;
}

/** A peer's view of one pin: `pinned`, `pinning`, `pin_queued`, `pin_error`, `unpinned`, … */
export interface PeerPinStatus {
  peername?: string;
  status: string;
  error?: string;
  timestamp?: string;
}

export interface GlobalPinInfo {
  cid: string;
  name?: string;
  allocations?: string[];
  peer_map: Record<string, PeerPinStatus>;
}

export interface PinOptions {
  name?: string;
  replicationMin?: number;
  replicationMax?: number;
  /** Multiaddresses of peers that have the content: Cluster's peers dial them before fetching. */
  origins?: string[];
  /** Cluster peer IDs to allocate the pin to first (Cluster's user allocations). */
  allocations?: string[];
  metadata?: Record<string, string>;
}

export interface Allocation {
  cid: string;
  metadata?: Record<string, string> | null;
  name?: string;
  allocations?: string[];
  origins?: string[];
}

export interface ClusterClient {
  id(options?: { signal?: AbortSignal }): Promise<ClusterPeer>;
  pin(cid: string, options?: PinOptions): Promise<void>;
  /** Unpins; a CID the cluster does not have is not an error. */
  unpin(cid: string): Promise<void>;
  status(cid: string, options?: { signal?: AbortSignal }): Promise<GlobalPinInfo>;
  /** Retries pins in `pin_error`. */
  recover(cid: string): Promise<void>;
  /** Every pin in the shared state, all at once: for small clusters (tests). */
  allocations(): Promise<Allocation[]>;
  /** Every pin in the shared state, one at a time as Cluster streams them (NDJSON). */
  eachAllocation(signal?: AbortSignal): AsyncIterable<Allocation>;
  /** The global status of every pin in one of `filter`'s states (e.g. `error`,
   * `unexpectedly_unpinned`), as Cluster streams them: Cluster compares its state with each
   * peer's IPFS node to tell. */
  eachStatus(filter: string[], signal?: AbortSignal): AsyncIterable<GlobalPinInfo>;
  /** The pin of this CID in the shared state; null when Cluster does not pin it. */
  allocation(cid: string, options?: { signal?: AbortSignal }): Promise<Allocation | null>;
}

/** Cluster v1 answers lists as a stream of JSON documents, one a line. */
function readNdjson<T>(text: string): T[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

export function createClusterClient(apiUrl: string): ClusterClient {
  const base = apiUrl.replace(/\/+$/, '');

  async function request(method: string, path: string, signal?: AbortSignal): Promise<string> {
    const res = await httpCall(new URL(`${base}${path}`), { method, signal: signal ?? AbortSignal.timeout(30_000) });
    if (res.status < 200 || res.status >= 300) {
      let message = res.text;
      try {
        message = (JSON.parse(res.text) as { message?: string }).message ?? res.text;
      } catch {
        // not JSON: keep the text
      }
      throw new ClusterError(res.status, `cluster ${method} ${path}: ${res.status} ${message}`.trim());
    }
    return res.text;
  }

  return {
    async id(options = {}) {
      return JSON.parse(await request('GET', '/id', options.signal)) as ClusterPeer;
    },

    async pin(cid, options = {}) {
      const query = new URLSearchParams();
      if (options.name) query.set('name', options.name);
      if (options.replicationMin !== undefined) query.set('replication-min', String(options.replicationMin));
      if (options.replicationMax !== undefined) query.set('replication-max', String(options.replicationMax));
      if (options.origins?.length) query.set('origins', options.origins.join(','));
      if (options.allocations?.length) query.set('user-allocations', options.allocations.join(','));
      for (const [k, v] of Object.entries(options.metadata ?? {})) query.set(`meta-${k}`, v);
      await request('POST', `/pins/${cid}?${query}`);
    },

    async unpin(cid) {
      try {
        await request('DELETE', `/pins/${cid}`);
      } catch (err) {
        if (err instanceof ClusterError && (err.status === 404 || /not found/i.test(err.message))) return;
        throw err;
      }
    },

    async status(cid, options = {}) {
      return JSON.parse(await request('GET', `/pins/${cid}`, options.signal)) as GlobalPinInfo;
    },

    async recover(cid) {
      await request('POST', `/pins/${cid}/recover`);
    },

    async allocations() {
      return readNdjson<Allocation>(await request('GET', '/allocations?filter=pin'));
    },

    async *eachAllocation(signal) {
      for await (const line of httpLines(new URL(`${base}/allocations?filter=pin`), signal)) yield JSON.parse(line) as Allocation;
    },

    async *eachStatus(filter, signal) {
      const url = new URL(`${base}/pins?filter=${encodeURIComponent(filter.join(','))}`);
      for await (const line of httpLines(url, signal)) yield JSON.parse(line) as GlobalPinInfo;
    },

    async allocation(cid, options = {}) {
      try {
        return JSON.parse(await request('GET', `/allocations/${cid}`, options.signal)) as Allocation;
      } catch (err) {
        // "pin is not part of the pinset"
        if (err instanceof ClusterError && err.status === 404) return null;
        throw err;
      }
    },
  };
}

/** Throws unless the Cluster peer answers and reaches its IPFS node within `timeoutMs`. */
export async function checkCluster(cluster: ClusterClient, timeoutMs: number): Promise<void> {
  const peer = await cluster.id({ signal: AbortSignal.timeout(timeoutMs) });
  if (peer.error) throw new Error(peer.error);
  if (peer.ipfs?.error) throw new Error(`cluster cannot reach its IPFS node: ${peer.ipfs.error}`);
}
