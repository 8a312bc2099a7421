// The gateway's side of the edge (stack/edge.ts). For a read, the edge first asks this
// gateway for the access decision (a GET of /_edge/gateway carrying the reader's Host, headers
// and, in X-Forwarded-*, its method, URI and address); the same handler that serves reads
// decides, and either answers the reader itself (an error in its documented shape, or a small
// answer it keeps in memory: api/gateway/app.ts), which the edge passes on (and may keep, when
// marked so: edge/caddy/answers.go), or
// answers with what the edge needs to serve the bytes from Kubo's gateway: the path there, the
// account to meter, the reader's CORS headers and, for /ipns and /folders, the path and
// lifetime the reader sees. The edge then reports each answer's size in its access log, sent
// as JSON lines over TCP to EDGE_REPORT_PORT of one API process, which meters them like the
// bytes it relays itself.
import type { ServerResponse } from 'node:http';
import net from 'node:net';
import type { Logger } from '../../infra/logger.js';
import type { BandwidthMeter } from '../../core/bandwidth.js';
import type { GatewayNamespace, GatewayTarget } from '../../core/gateway.js';
import { EDGE_HEADERS } from '../../edge/protocol.js';

export { EDGE_DECISION_PATH, EDGE_TLS_ASK_PATH } from '../../edge/protocol.js';

const CORS_COPIES: [string, string][] = [
  ['Access-Control-Allow-Origin', EDGE_HEADERS.corsOrigin],
  ['Access-Control-Expose-Headers', EDGE_HEADERS.corsExpose],
  ['Access-Control-Allow-Methods', EDGE_HEADERS.corsMethods],
  ['Vary', EDGE_HEADERS.vary],
];

/** Answers an allowing decision: 200, empty, with the headers the edge copies. */
export function allowAtEdge(
  res: ServerResponse,
  read: {
    account: string;
    upstreamPath: string;
    namespace: GatewayNamespace;
    id: string;
    target: GatewayTarget;
    cors: Record<string, string>;
  },
): void {
  const headers: Record<string, string> = {
    [EDGE_HEADERS.account]: read.account,
    // Always with a query part, possibly empty: Caddy's rewrite keeps the reader's query (and
    // with it a gateway token) when the new URI has none.
    [EDGE_HEADERS.path]: read.upstreamPath.includes('?') ? read.upstreamPath : `${read.upstreamPath}?`,
    [EDGE_HEADERS.prefix]: read.namespace === 'ipfs' ? `/ipfs/${read.target.cid}` : `/${read.namespace}/${encodeURIComponent(read.id)}`,
    'Cache-Control': 'no-store',
    'Content-Length': '0',
  };
  if (read.namespace !== 'ipfs') headers[EDGE_HEADERS.cache] = `public, max-age=${read.target.ttlS ?? 60}`;
  for (const [name, copy] of CORS_COPIES) if (read.cors[name]) headers[copy] = read.cors[name];
  res.writeHead(200, headers).end();
}

export interface EdgeReports {
  port: number;
  close(): Promise<void>;
}

/**
 * Takes the edge's access log: one JSON object per line, Caddy's access-log entry with the
 * `account` field the edge appends (the decision's X-Stupa-Account) and `size`, the bytes of the
 * body it sent. Bytes are metered like those the gateway relays itself (flushed within
 * BANDWIDTH_FLUSH_MS). A line that is not such an entry is skipped.
 */
export function startEdgeReports(host: string, port: number, bandwidth: BandwidthMeter, logger: Logger): Promise<EdgeReports> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let rest = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop()!;
      if (rest.length > 1 << 20) rest = ''; // no line is this long; a peer that is not Caddy
      for (const line of lines) meter(line);
    });
  });
  function meter(line: string): void {
    let entry: { account?: unknown; size?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return;
    }
    if (typeof entry.account === 'string' && /^usr_[0-9A-Za-z]{1,64}$/.test(entry.account) && typeof entry.size === 'number') {
      bandwidth.add(entry.account, entry.size);
    }
  }
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const bound = (server.address() as net.AddressInfo).port;
      logger.info({ port: bound }, 'taking edge reports');
      resolve({
        port: bound,
        close: () =>
          new Promise<void>((done) => {
            // Destroyed, not ended: the edge keeps its end open, and only reads come in.
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}
