// The edge's configuration: a Caddyfile (Caddy, built from its Go module like the stack's
// other servers, is the one public entry). It listens on the public ports and sends
//   - the REST API and S3 to the API processes, balanced, with health checks (the API's
//     /readyz actively, every surface passively: a process that refuses connections is
//     skipped and the request retried on the next);
//   - a gateway read (GET/HEAD) first to the access decision (forward_auth: the gateway of an
//     API process, api/gateway/edge.ts) and, when allowed, straight to a Kubo gateway that
//     holds the content, so the bytes never pass through Node; a refusal is the decision's own
//     answer, in its documented shape. Every other gateway request (CORS preflights, other
//     methods) goes to the API's gateway as a whole;
//   - its access log of gateway reads (each answer's size and account) as JSON lines to the
//     API process that meters them (EDGE_REPORT_PORT).
// With `tls`, the public names get certificates: `internal` from Caddy's own local CA (tests,
// private networks), `acme` from Let's Encrypt, account gateways and buckets on demand (each
// subdomain's certificate when it is first asked for, once the service says the name is its own).
// Written by npm start (infra/stack/edge.ts) and, for a deployment, by `npm run edge:config`.
//
// Why Caddy: it measured 0.55–0.65 CPU s per GiB relayed here against HAProxy's 0.38–0.48
// (#29), but HAProxy 2.6 has no access-decision hook without a Lua script of our own, and Caddy
// has forward_auth, health checks, TLS with its own CA and ACME, and a net log writer built in.
import { EDGE_DECISION_PATH, EDGE_HEADERS, EDGE_SECRET_HEADER, EDGE_TLS_ASK_PATH } from './protocol.js';

/** One API process's three surfaces, as host:port. */
export interface EdgeUpstream {
  api: string;
  gateway: string;
  s3: string;
}

export interface EdgeTls {
  mode: 'internal' | 'acme';
  /** The public names: the REST API's host, the gateway's domain (accounts are its
   * subdomains) and S3's domain (buckets are its subdomains). */
  apiHost: string;
  gatewayDomain: string;
  s3Domain: string;
  /** ACME account e-mail (Let's Encrypt's notices). */
  email?: string;
}

export interface EdgeOptions {
  /** Where the public ports listen (127.0.0.1 locally; 0.0.0.0 in a deployment). */
  host: string;
  /** The public ports; with `tls`, `api` is the HTTPS port of every name and `gateway` and `s3`
   * are unused, and `http` (when given) redirects to HTTPS (ACME's HTTP challenge too). */
  ports: { api: number; gateway: number; s3: number; http?: number };
  apis: EdgeUpstream[];
  /** Kubo gateways (host:port), tried in order: with Gateway.NoFetch a peer that does not hold
   * the content answers 404 and the next is asked. */
  kuboGateways: string[];
  /** EDGE_SECRET of the API processes. */
  secret: string;
  /** host:port of the API process with EDGE_REPORT_PORT; null: bytes are not metered. */
  reports: string | null;
  tls?: EdgeTls;
}

const HEALTH = ['health_uri /readyz', 'health_interval 2s', 'health_timeout 2s'];
// A dial that fails marks the upstream down for 10 s and the request goes to the next one;
// only requests that never reached an upstream are retried, so an upload is never sent twice.
// Caddy flushes answers of unknown length at once by itself; `flush_interval -1` is not set, as
// it would also keep a request to the backend going after its client left.
const PASSIVE = ['lb_policy round_robin', 'lb_retries 3', 'fail_duration 10s'];

const block = (head: string, lines: string[], indent = ''): string[] => [
  `${indent}${head} {`,
  ...lines.map((l) => `${indent}\t${l}`),
  `${indent}}`,
];

/** The answer for a failure of Kubo's gateway, in the gateway's error shape (api/gateway/errors.ts). */
function kuboFailure(): string[] {
  const json = (reason: string, details: string) => `\`{"error":{"reason":"${reason}","details":"${details}"}}\``;
  const respond = (status: string, reason: string, details: string) => [
    'header Content-Type "application/json; charset=utf-8"',
    'header Cache-Control no-store',
    `respond ${json(reason, details)} ${status}`,
  ];
  return [
    '@missing status 404',
    ...block('handle_response @missing', respond('404', 'NOT_FOUND', 'no such path in this content')),
    '@refused status 4xx',
    ...block(
      'handle_response @refused',
      respond('{rp.status_code}', 'BAD_REQUEST', 'the gateway cannot answer this request for this content'),
    ),
    '@failed status 5xx',
    ...block('handle_response @failed', [
      'header Retry-After 5',
      ...respond('502', 'UPSTREAM_FAILED', 'the content could not be read; retry later'),
    ]),
  ];
}

/** Kubo's answer passed on: what the reader asked for, Kubo's CORS and server headers dropped,
 * and a 404 asking the next peer (nested, one level per peer). */
function kuboProxy(gateways: string[]): string[] {
  const [here, ...rest] = gateways;
  const lines = [
    // A path-gateway request: Kubo treats a Host of localhost as its subdomain gateway.
    'header_up Host {upstream_hostport}',
    // Kubo reads X-Forwarded-Host as the name a subdomain or DNSLink gateway was asked for:
    // with an account's host there, it looked the name up in DNS (5 s stalls offline, measured).
    ...[
      'X-Forwarded-Host',
      'X-Forwarded-Proto',
      'X-Forwarded-For',
      'X-Gateway-Token',
      'Cookie',
      'Authorization',
      'Origin',
      ...Object.values(EDGE_HEADERS),
    ].map((h) => `header_up -${h}`),
    ...[
      'Access-Control-Allow-Origin',
      'Access-Control-Allow-Methods',
      'Access-Control-Allow-Headers',
      'Access-Control-Expose-Headers',
      'Server',
    ].map((h) => `header_down -${h}`),
    // /ipns/<name> and /folders/<name> keep the reader's path (a no-op for /ipfs/<cid>).
    `header_down X-Ipfs-Path "^/ipfs/[^/?]+" "{http.request.header.${EDGE_HEADERS.prefix}}"`,
    `header_down Location "^/ipfs/[^/?]+" "{http.request.header.${EDGE_HEADERS.prefix}}"`,
    'transport http {',
    '\tkeepalive 60s',
    '\tkeepalive_idle_conns 128',
    // Kubo's answers read in large pieces: 0.48 CPU s a GiB at the edge, 0.51-0.53 with the
    // default 4 KiB buffer and a flush after every write (npm run bench -- --edge).
    '\tread_buffer 256KiB',
    '}',
    ...(rest.length > 0 ? ['@elsewhere status 404', ...block('handle_response @elsewhere', kuboProxy(rest))] : kuboFailure()),
  ];
  return block(`reverse_proxy ${here}`, lines);
}

function gatewayRoutes(options: EdgeOptions): string[] {
  const decisions = options.apis.map((a) => a.gateway).join(' ');
  const copies = Object.values(EDGE_HEADERS);
  const responseHeaders: [string, string, string][] = [
    ['cors_origin', EDGE_HEADERS.corsOrigin, 'Access-Control-Allow-Origin'],
    ['cors_expose', EDGE_HEADERS.corsExpose, 'Access-Control-Expose-Headers'],
    ['cors_methods', EDGE_HEADERS.corsMethods, 'Access-Control-Allow-Methods'],
    ['cache', EDGE_HEADERS.cache, 'Cache-Control'],
  ];
  const route = [
    // Only the decision sets these: a reader's own are dropped first.
    ...copies.map((h) => `request_header -${h}`),
    ...block(`forward_auth ${decisions}`, [
      `uri ${EDGE_DECISION_PATH}`,
      `header_up ${EDGE_SECRET_HEADER} "${options.secret}"`,
      `copy_headers ${copies.join(' ')}`,
      'lb_policy round_robin',
      'lb_retries 3',
      'fail_duration 10s',
    ]),
    ...(options.reports ? [`log_append account {http.request.header.${EDGE_HEADERS.account}}`] : []),
    ...responseHeaders.flatMap(([name, copy, header]) => [
      `@${name} header ${copy} *`,
      ...block(`header @${name}`, [`${header} "{http.request.header.${copy}}"`, 'defer']),
    ]),
    `@vary header ${EDGE_HEADERS.vary} *`,
    ...block('header @vary', [`+Vary "{http.request.header.${EDGE_HEADERS.vary}}"`, 'defer']),
    `rewrite * {http.request.header.${EDGE_HEADERS.path}}`,
    ...kuboProxy(options.kuboGateways),
  ];
  return [
    '@read method GET HEAD',
    ...block('handle @read', block('route', route)),
    ...block('handle', block(`reverse_proxy ${decisions}`, PASSIVE)),
    ...(options.reports
      ? block('log', [
          ...block(`output net ${options.reports}`, ['dial_timeout 2s', 'soft_start']),
          // The reader's URI (it may carry a gateway token) and headers never leave the edge.
          ...block('format filter', ['wrap json', ...block('fields', ['request delete', 'resp_headers delete', 'user_id delete'])]),
        ])
      : []),
  ];
}

/**
 * What the edge answers when it cannot reach any API process (or Kubo for a decided read): the
 * service's 503 in each surface's error shape, never Caddy's empty 502. Every API process down
 * is a dependency gone for the reader, and a 503 with Retry-After is what clients retry.
 */
function unavailable(surface: 'json' | 's3'): string[] {
  const body =
    surface === 's3'
      ? '`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>Service is unable to handle request.</Message></Error>`'
      : '`{"error":{"reason":"DEPENDENCY_UNAVAILABLE","details":"the service is not reachable; retry later"}}`';
  return block('handle_errors', [
    `header Content-Type "${surface === 's3' ? 'application/xml' : 'application/json; charset=utf-8'}"`,
    'header Cache-Control no-store',
    'header Retry-After 5',
    `respond ${body} 503`,
  ]);
}

/** The Caddyfile for `options`. */
export function edgeCaddyfile(options: EdgeOptions): string {
  const { tls, ports } = options;
  const apis = (kind: keyof EdgeUpstream) => options.apis.map((a) => a[kind]).join(' ');
  const global = [
    'admin off',
    'persist_config off',
    ...(!tls
      ? ['auto_https off']
      : ports.http
        ? [`https_port ${ports.api}`, `http_port ${ports.http}`]
        : [`https_port ${ports.api}`, 'auto_https disable_redirects']),
    ...(tls?.email ? [`email ${tls.email}`] : []),
    // Caddy would otherwise add its local CA to the system's trust store (it runs as root here).
    ...(tls?.mode === 'internal' ? ['skip_install_trust'] : []),
    ...(tls?.mode === 'acme' ? block('on_demand_tls', [`ask http://${options.apis[0]!.gateway}${EDGE_TLS_ASK_PATH}`]) : []),
    `default_bind ${options.host}`,
    ...block('servers', ['timeouts {', '\tread_header 10s', '\tidle 2m', '}']),
  ];
  const siteTls = (wildcard: boolean) =>
    !tls ? [] : tls.mode === 'internal' ? ['tls internal'] : wildcard ? block('tls', ['on_demand']) : [];
  const site = (address: string, lines: string[]) => ['', ...block(address, lines)];
  const api = block(`reverse_proxy ${apis('api')}`, [...PASSIVE, ...HEALTH]);
  const s3 = block(`reverse_proxy ${apis('s3')}`, PASSIVE);
  const lines = tls
    ? [
        ...site(`https://${tls.apiHost}`, [...siteTls(false), ...api, ...unavailable('json')]),
        ...site(`https://*.${tls.gatewayDomain}`, [...siteTls(true), ...gatewayRoutes(options), ...unavailable('json')]),
        ...site(`https://${tls.s3Domain}, https://*.${tls.s3Domain}`, [...siteTls(true), ...s3, ...unavailable('s3')]),
      ]
    : [
        ...site(`http://:${ports.api}`, [...api, ...unavailable('json')]),
        ...site(`http://:${ports.gateway}`, [...gatewayRoutes(options), ...unavailable('json')]),
        ...site(`http://:${ports.s3}`, [...s3, ...unavailable('s3')]),
      ];
  return ['{', ...global.map((l) => `\t${l}`), '}', ...lines, ''].join('\n');
}
