// IPFS Cluster REST API client.
//
// Written here instead of using the `ipfs-cluster-api` package: measured against Cluster
// v1.1.6, its 0.0.9 release (2019, callback API) fails on every list call once more than
// one pin exists, because Cluster v1 streams lists as NDJSON while the package parses one
// JSON document, and it reports errors as `[object Object]`. The REST calls needed are few.

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

export interface ClusterClient {
  id(options?: { signal?: AbortSignal }): Promise<ClusterPeer>;
}

export function createClusterClient(apiUrl: string): ClusterClient {
  const base = apiUrl.replace(/\/+$/, '');

  async function request(method: string, path: string, signal?: AbortSignal): Promise<Response> {
    const res = await fetch(`${base}${path}`, { method, signal });
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      let message = text;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? text;
      } catch {
        // not JSON: keep the text
      }
      throw new ClusterError(res.status, `cluster ${method} ${path}: ${res.status} ${message}`.trim());
    }
    return res;
  }

  return {
    async id(options = {}) {
      const res = await request('GET', '/id', options.signal);
      return (await res.json()) as ClusterPeer;
    },
  };
}

/** Throws unless the Cluster peer answers and reaches its IPFS node within `timeoutMs`. */
export async function checkCluster(cluster: ClusterClient, timeoutMs: number): Promise<void> {
  const peer = await cluster.id({ signal: AbortSignal.timeout(timeoutMs) });
  if (peer.error) throw new Error(peer.error);
  if (peer.ipfs?.error) throw new Error(`cluster cannot reach its IPFS node: ${peer.ipfs.error}`);
}
