// An API behind a real edge (Caddy, stack/edge.ts) for tests: the API's processes on
// their own ephemeral ports, the edge on free public ports in front of them, reading content
// from the test stack's Kubo gateway (or from `kuboGateway`, e.g. a recorder, or from each of
// `kuboGateways` in turn), and the API
// taking the edge's reports.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { ApiServer } from '../../api/server.js';
import { startEdge, type Edge, type EdgeTls } from '../../stack/edge.js';
import { freePorts } from '../../stack/ports.js';
import { startTestApi, tempDir } from './stack.js';
import { eventually } from './worker.js';

export interface EdgedApi {
  /** The first API process (the one taking the edge's reports). */
  api: ApiServer;
  apis: ApiServer[];
  edge: Edge;
  /** What the API processes were given about the edge: EDGE_SECRET, EDGE_PURGE_URLS. */
  env: { EDGE_SECRET: string; EDGE_PURGE_URLS: string };
  /** The edge's public addresses. */
  urls: { api: string; gateway: string; s3: string };
  ports: { api: number; gateway: number; s3: number };
  /** Starts the edge again with the same configuration (after a test killed it). */
  restartEdge(): Promise<void>;
  close(): Promise<void>;
}

export async function startEdgedApi(
  env: Record<string, string | undefined> = {},
  options: { apis?: number; kuboGateway?: string; kuboGateways?: string[]; tls?: Omit<EdgeTls, 'mode'> & { mode: 'internal' } } = {},
): Promise<EdgedApi> {
  const [apiPort, gatewayPort, s3Port, reportPort, purgePort] = await freePorts(5);
  const ports = { api: apiPort!, gateway: gatewayPort!, s3: s3Port! };
  const secret = crypto.randomBytes(32).toString('hex');
  const urls = options.tls
    ? {
        api: `https://${options.tls.apiHost}:${ports.api}`,
        gateway: `https://${options.tls.gatewayDomain}:${ports.api}`,
        s3: `https://${options.tls.s3Domain}:${ports.api}`,
      }
    : { api: `http://127.0.0.1:${ports.api}`, gateway: `http://localhost:${ports.gateway}`, s3: `http://localhost:${ports.s3}` };
  const common = {
    MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    EDGE_SECRET: secret,
    EDGE_PURGE_URLS: `http://127.0.0.1:${purgePort}`,
    PUBLIC_URL: urls.api,
    GATEWAY_PUBLIC_URL: urls.gateway,
    S3_PUBLIC_URL: urls.s3,
    ...env,
  };
  const apis: ApiServer[] = [];
  for (let n = 0; n < (options.apis ?? 1); n++) {
    apis.push(await startTestApi({ ...common, ...(n === 0 ? { EDGE_REPORT_PORT: String(reportPort) } : {}) }));
  }
  const hostPort = (url: string) => new URL(url).host;
  const edgeOptions = {
    dataDir: tempDir('stupa-edge-'),
    host: '127.0.0.1',
    ports: { ...ports, purge: purgePort! },
    apis: apis.map((a) => ({ api: hostPort(a.url), gateway: hostPort(a.gatewayUrl), s3: hostPort(a.s3Url) })),
    kuboGateways: (options.kuboGateways ?? [options.kuboGateway ?? process.env.STUPA_TEST_KUBO_GATEWAY_URL!]).map(hostPort),
    secret,
    reports: `127.0.0.1:${reportPort}`,
    ...(options.tls ? { tls: options.tls } : {}),
  };
  let edge = await startEdge(edgeOptions);
  return {
    api: apis[0]!,
    apis,
    get edge() {
      return edge;
    },
    env: { EDGE_SECRET: secret, EDGE_PURGE_URLS: `http://127.0.0.1:${purgePort}` },
    urls,
    ports,
    async restartEdge() {
      await edge.stop();
      edge = await startEdge(edgeOptions);
    },
    async close() {
      await edge.stop();
      await Promise.all(apis.map((a) => a.close()));
    },
  };
}

/** The root certificate of an edge started with `tls.mode` internal, once Caddy has written it. */
export async function edgeRootCa(edged: EdgedApi): Promise<Buffer> {
  const file = edged.edge.caFile;
  return (await eventually(
    async () => (file && fs.existsSync(file) ? fs.readFileSync(file) : null),
    Boolean,
    10_000,
    "the local CA's root certificate",
  )) as Buffer;
}
