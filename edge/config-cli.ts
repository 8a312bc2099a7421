// `npm run edge:config`: prints the edge's Caddyfile for a deployment (stack/edge.ts
// writes one for npm start from its own stack). It reads the environment the API
// processes are given, so both sides agree: the public URLs (the edge listens on their ports;
// with EDGE_TLS, on PUBLIC_URL's), API_PORT, GATEWAY_PORT and S3_PORT (where every API process
// listens), KUBO_GATEWAY_URL and KUBO_PEER_GATEWAY_URLS, EDGE_SECRET, EDGE_REPORT_PORT and
// EDGE_PURGE_URLS (the edge's purge listener takes the first one's port); and
// EDGE_APIS, the API processes' host names (comma-separated; in Kubernetes, their Service),
// EDGE_HOST (default 0.0.0.0), EDGE_TLS, EDGE_HTTP_PORT, EDGE_ACME_EMAIL.
// The Kubernetes manifests run it in the edge pod's init container.
import { loadConfig } from '../infra/config.js';
import { edgeCaddyfile, type EdgeTls } from './caddyfile.js';

function fail(message: string): never {
  process.stderr.write(`edge:config: ${message}\n`);
  process.exit(1);
}

const env = process.env;
const config = loadConfig(env, []);
const apis = (env.EDGE_APIS ?? '')
  .split(',')
  .map((h) => h.trim())
  .filter(Boolean);
if (apis.length === 0) fail('EDGE_APIS must name the API processes (host names, comma-separated)');
if (!config.edge.secret) fail('EDGE_SECRET must be set, the same as the API processes have');
const tlsMode = env.EDGE_TLS || null;
if (tlsMode !== null && tlsMode !== 'internal' && tlsMode !== 'acme') fail(`EDGE_TLS must be internal or acme (it is "${tlsMode}")`);
const publicUrl = (value: string | null, name: string) => new URL(value ?? fail(`${name} must be set: the edge listens on its port`));
const urls = {
  api: publicUrl(config.api.publicUrl, 'PUBLIC_URL'),
  gateway: publicUrl(config.gateway.publicUrl, 'GATEWAY_PUBLIC_URL'),
  s3: publicUrl(config.s3.publicUrl, 'S3_PUBLIC_URL'),
};
const portOf = (url: URL) => Number(url.port || (url.protocol === 'https:' ? 443 : 80));
const tls: EdgeTls | undefined = tlsMode
  ? {
      mode: tlsMode,
      apiHost: urls.api.hostname,
      gatewayDomain: config.gateway.domain,
      s3Domain: config.s3.domain,
      ...(env.EDGE_ACME_EMAIL ? { email: env.EDGE_ACME_EMAIL } : {}),
    }
  : undefined;
const hostPort = (url: string) => new URL(url).host;
process.stdout.write(
  edgeCaddyfile({
    host: env.EDGE_HOST || '0.0.0.0',
    ports: {
      api: portOf(urls.api),
      gateway: portOf(urls.gateway),
      s3: portOf(urls.s3),
      ...(env.EDGE_HTTP_PORT ? { http: Number(env.EDGE_HTTP_PORT) } : {}),
      // The API processes' EDGE_PURGE_URLS name this edge's purge listener: its port.
      ...(config.edge.purgeUrls[0] ? { purge: portOf(new URL(config.edge.purgeUrls[0])) } : {}),
    },
    apis: apis.map((host) => ({
      api: `${host}:${config.api.port}`,
      gateway: `${host}:${config.gateway.port}`,
      s3: `${host}:${config.s3.port}`,
    })),
    kuboGateways: [config.kubo.gatewayUrl, ...config.kubo.peerGatewayUrls].map(hostPort),
    secret: config.edge.secret,
    reports: config.edge.reportPort === null ? null : `${apis[0]}:${config.edge.reportPort}`,
    ...(tls ? { tls } : {}),
  }),
);
