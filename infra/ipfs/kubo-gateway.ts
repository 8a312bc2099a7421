// Kubo's own HTTP gateway, as the service's gateway reads it. Kubo implements the IPFS path
// gateway specification (ranges, ETags, directory listings and index.html, `?format=raw|car`,
// content types by name or sniffing); the service's gateway decides who may read what and
// passes the request on. Only this listener is used, never Kubo's RPC API, and Kubo is set to
// serve only blocks it has (`Gateway.NoFetch`), so a path the service let through cannot make
// Kubo fetch from the network.
import http from 'node:http';

/** Request headers the gateway passes to Kubo: what selects or conditions the answer. */
const FORWARDED_REQUEST = ['range', 'if-range', 'if-none-match', 'if-modified-since', 'accept'];

/** Response headers passed back to the client; Kubo's own CORS and server headers are not. */
export const FORWARDED_RESPONSE = [
  'content-type',
  'content-length',
  'content-range',
  'content-disposition',
  'content-encoding',
  'accept-ranges',
  'etag',
  'last-modified',
  'cache-control',
  'location',
  'vary',
  'x-ipfs-path',
  'x-ipfs-roots',
  'x-content-type-options',
];

export interface KuboGateway {
  /** GETs or HEADs `path` (`/ipfs/<cid>/…`, with its query) from Kubo's gateway. */
  request(method: 'GET' | 'HEAD', path: string, headers: http.IncomingHttpHeaders, signal?: AbortSignal): Promise<http.IncomingMessage>;
  close(): void;
}

/** Answers that another peer's gateway may not give: Kubo with `Gateway.NoFetch` answers 404
 * for content it does not have, and 5xx when it cannot read it. */
const TRY_NEXT = new Set([404, 500, 502, 503, 504]);

/**
 * Reads through `baseUrl`, and with several Cluster peers through `peerUrls` in turn when an
 * answer may come from another peer (its own does not have the content, because the pin is
 * allocated elsewhere, or is down). A path that is missing everywhere costs one small request
 * per peer before its 404.
 */
export function createKuboGateway(baseUrl: string, peerUrls: string[] = []): KuboGateway {
  const bases = [baseUrl, ...peerUrls].map((u) => new URL(u));
  // Connections are kept and reused: a gateway answers many small reads.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const one = (base: URL, method: string, path: string, headers: http.OutgoingHttpHeaders, signal?: AbortSignal) =>
    new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: base.hostname, port: base.port, method, path, headers, agent, signal }, resolve);
      req.on('error', reject);
      req.end();
    });
  return {
    async request(method, path, incoming, signal) {
      const headers: http.OutgoingHttpHeaders = {};
      for (const name of FORWARDED_REQUEST) {
        const value = incoming[name];
        if (value !== undefined) headers[name] = value;
      }
      for (let i = 0; ; i++) {
        const last = i === bases.length - 1;
        try {
          const res = await one(bases[i]!, method, path, headers, signal);
          if (last || !TRY_NEXT.has(res.statusCode ?? 0)) return res;
          res.resume();
        } catch (err) {
          if (last || signal?.aborted) throw err;
        }
      }
    },
    close: () => agent.destroy(),
  };
}

/** The identity CID of no bytes: every IPFS gateway can answer it without reading a block. */
const EMPTY_IDENTITY_CID = 'bafkqaaa';

/**
 * Throws unless `baseUrl` answers as an IPFS gateway within `timeoutMs`: HEAD of a CID that
 * needs no block is 200 with `X-Ipfs-Path`. Something else on the port (a wrong address, say
 * Kubo's default :8080 beside an external Kubo whose gateway is elsewhere) fails by name,
 * instead of every read answering 503 later.
 */
export async function checkKuboGateway(baseUrl: string, timeoutMs: number): Promise<void> {
  if (!baseUrl) throw new Error('no Kubo gateway address (KUBO_GATEWAY_URL)');
  const base = new URL(baseUrl);
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request(
      { host: base.hostname, port: base.port, method: 'HEAD', path: `/ipfs/${EMPTY_IDENTITY_CID}`, signal: AbortSignal.timeout(timeoutMs) },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
  res.resume();
  if (res.statusCode !== 200 || !res.headers['x-ipfs-path'])
    throw new Error(`${base.origin} does not answer as an IPFS gateway (HEAD /ipfs/${EMPTY_IDENTITY_CID}: ${res.statusCode})`);
}
