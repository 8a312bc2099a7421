// The edge's configuration: a Caddyfile (Caddy, built from its Go module like the stack's
// other servers, is the one public entry). It listens on the public ports and sends
//   - the REST API and S3 to the API processes, balanced, with health checks (the API's
//     /readyz actively; on every surface, a request a process refuses to connect is retried
//     on the next);
//   - a gateway read (GET/HEAD) first to the access decision (the gateway of an API process,
//     api/gateway/edge.ts) and, when allowed, straight to a Kubo gateway that holds the
//     content, so the bytes never pass through Node (and, for an answer of known length on a
//     plain HTTP/1 connection, not through the edge's memory either: edge/caddy/splice.go
//     moves them with splice(2)); a refusal, or a small answer the API keeps
//     in memory, is the decision's own answer. Every other gateway request (CORS preflights,
//     other methods) goes to the API's gateway as a whole;
//   - an S3 GET likewise to S3's decision (api/s3/edge.ts), which answers everything but the
//     bytes of a large object or a range; those come from Kubo with the object's headers;
//   - its access log of gateway reads (each answer's size and account) as JSON lines to the
//     API process that meters them (EDGE_REPORT_PORT);
//   - a small answer the service marked as keepable is answered again by the edge itself for a
//     second (edge/caddy/answers.go, built into the edge), and forgotten at once when the
//     service says the account's rules changed (the purge port).
// With `tls`, the public names get certificates: `internal` from Caddy's own local CA (tests,
// private networks), `acme` from Let's Encrypt, account gateways and buckets on demand (each
// subdomain's certificate when it is first asked for, once the service says the name is its own).
// Written by npm start (stack/edge.ts) and, for a deployment, by `npm run edge:config`.
//
// Why Caddy: it measured 0.55–0.65 CPU s per GiB relayed here against HAProxy's 0.38–0.48
// (#29), but HAProxy 2.6 has no access-decision hook without a Lua script of our own, and Caddy
// has a reverse proxy that can act on its upstream's answer (forward_auth, handle_response), health checks, TLS with its own CA and ACME, and a net log writer built in.
import { ANSWER_MAX_BYTES, ANSWER_MEMORY_BYTES, EDGE_ANSWER_TTL_MS } from '../infra/constants.js';
import { block, type Surface } from './caddy-syntax.js';
import { kuboFailure, noTunnel, unavailable } from './edge-errors.js';
import {
  EDGE_DECISION_PATH,
  EDGE_HEADERS,
  EDGE_KEEP_HEADER,
  EDGE_PURGE_PATH,
  EDGE_S3_DECISION_PATH,
  EDGE_SECRET_HEADER,
  EDGE_TLS_ASK_PATH,
  EDGE_UPSTREAM_KEEPALIVE_MS,
} from './protocol.js';

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
   * are unused, and `http` (when given) redirects to HTTPS (ACME's HTTP challenge too).
   * `purge` (plain HTTP on `host`, for the API processes only: EDGE_PURGE_URLS) is where the
   * service has the edge forget an account's kept answers. */
  ports: { api: number; gateway: number; s3: number; http?: number; purge?: number };
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

// An upstream is out after two failed checks in a row, not one: with one, a single /readyz slowed
// past 2 s on a loaded host cuts the only API process off until the next check, and every call
// through the edge answers 503 meanwhile (the likely cause of a 503 a full test run met once in
// tests/s3-edge.test.ts). A dead process is still passed over at once: its dials fail, and the
// request goes to the next upstream.
const HEALTH = ['health_uri /readyz', 'health_interval 2s', 'health_timeout 2s', 'health_fails 2'];
// A dial that fails sends the request to the next upstream; only requests that never reached
// an upstream are retried, so an upload is never sent twice. Up to 8 retries, not 3: until the
// health checks mark a stopped process down (2-4 s), round robin keeps offering it, and a retry
// lands on it again whenever another request took the turn in between. With 3, 16 concurrent
// readers met a 503 in each of 3 runs while one of two API processes stopped (and 4 readers did
// once in about 10 full test runs); with 8, none in 7 runs at 16 and 32. A refused dial costs
// well under a millisecond, and with every process down the answer is still an immediate 503.
// No passive health (fail_duration): Caddy counts any failed exchange against the upstream, also
// one the client broke (a body shorter than its Content-Length), and with one API process a
// single such request made every S3 call 503 for the next 10 s (measured with ceph/s3-tests).
// Caddy flushes answers of unknown length at once by itself; `flush_interval -1` is not set, as
// it would also keep a request to the backend going after its client left. Idle connections to
// an API process are closed by the edge before the process would close them (protocol.ts).
// The edge has answered a client's `Expect: 100-continue` itself (stupa_continue, below), so the
// API is not asked again: with the header, an API process refusing at once closed the connection
// as Caddy was sending the body, and the reader got a 503 (5-6 of 300 unsigned S3 PUTs of
// 256 KiB through npm start's edge); without it, the process reads and drops the body and refuses.
const BALANCED = [
  'lb_policy round_robin',
  'lb_retries 8',
  'header_up -Expect',
  'transport http {',
  `\tkeepalive ${EDGE_UPSTREAM_KEEPALIVE_MS / 1000}s`,
  '}',
];

/** What the reader sent that Kubo is never given. Kubo reads X-Forwarded-Host as the name a
 * subdomain or DNSLink gateway was asked for: with an account's host there, it looked the name
 * up in DNS (5 s stalls offline, measured). For S3, the reader's conditions were the decision's
 * (on the object's ETag, not Kubo's) and its Accept must not ask Kubo for a CAR. */
function notForKubo(surface: Surface): string[] {
  const common = [
    'X-Forwarded-Host',
    'X-Forwarded-Proto',
    'X-Forwarded-For',
    'Cookie',
    'Authorization',
    'Origin',
    ...Object.values(EDGE_HEADERS),
  ];
  if (surface === 'gateway') return [...common, 'X-Gateway-Token'];
  return [
    ...common,
    'X-Amz-*',
    'Accept',
    'Accept-Encoding',
    'If-Match',
    'If-None-Match',
    'If-Modified-Since',
    'If-Unmodified-Since',
    'If-Range',
  ];
}

/** What Kubo answers that the reader does not get: its CORS and server headers; for S3 every
 * header but the length and range, as the decision's (the object's) are the reader's. */
function notFromKubo(surface: Surface): string[] {
  const common = ['Access-Control-*', 'Server'];
  if (surface === 'gateway') return common;
  return [
    ...common,
    'Etag',
    'Content-Type',
    'Cache-Control',
    'Last-Modified',
    'Accept-Ranges',
    'Content-Disposition',
    'Vary',
    'X-Ipfs-*',
    'X-Content-Type-Options',
    'Timing-Allow-Origin',
  ];
}

/** Kubo's answer passed on, and a 404 asking the next peer (nested, one level per peer). */
function kuboProxy(gateways: string[], surface: Surface): string[] {
  const [here, ...rest] = gateways;
  const lines = [
    // A path-gateway request: Kubo treats a Host of localhost as its subdomain gateway.
    'header_up Host {upstream_hostport}',
    ...notForKubo(surface).map((h) => `header_up -${h}`),
    ...notFromKubo(surface).map((h) => `header_down -${h}`),
    // /ipns/<name> and /folders/<name> keep the reader's path (a no-op for /ipfs/<cid>).
    ...(surface === 'gateway'
      ? [
          `header_down X-Ipfs-Path "^/ipfs/[^/?]+" "{http.request.header.${EDGE_HEADERS.prefix}}"`,
          `header_down Location "^/ipfs/[^/?]+" "{http.request.header.${EDGE_HEADERS.prefix}}"`,
        ]
      : []),
    'transport http {',
    '\tkeepalive 60s',
    '\tkeepalive_idle_conns 128',
    // Kubo's answers read in large pieces: 0.48 CPU s a GiB at the edge, 0.51-0.53 with the
    // default 4 KiB buffer and a flush after every write (npm run bench -- --edge).
    '\tread_buffer 256KiB',
    '}',
    ...(rest.length > 0
      ? ['@elsewhere status 404', ...block('handle_response @elsewhere', kuboProxy(rest, surface))]
      : kuboFailure(surface)),
  ];
  return block(`reverse_proxy ${here}`, lines);
}

/** Kubo's answer to an allowed read: a 200 or 206 of known length from the first gateway that
 * does not answer 404, relayed with splice (caddy/splice.go) under the proxy's rules for fields;
 * anything else from kuboProxy, which asks again. */
function kuboRelay(gateways: string[], surface: Surface): string[] {
  return [
    ...block(`stupa_splice ${gateways.join(' ')}`, [
      `drop_up ${notForKubo(surface).join(' ')}`,
      `drop_down ${notFromKubo(surface).join(' ')}`,
      ...(surface === 'gateway' ? [`prefix_header ${EDGE_HEADERS.prefix}`] : []),
    ]),
    ...kuboProxy(gateways, surface),
  ];
}

/**
 * Asks the service for the decision on a read: the request, as the reader sent it, goes to
 * `path` on one of `upstreams` (a GET, with the reader's method and URI in X-Forwarded-* and the
 * edge's secret). An answer carrying X-Stupa-Path allows the edge to serve the bytes from Kubo:
 * those of `copies` it carries become request headers for what follows, and `onAllow` runs.
 * Any other answer (an error, or the service's own answer with its body) passes to the reader
 * unchanged. Written out rather than with forward_auth, whose "allowed" is any 2xx: here a 200
 * with a body (a small answer from the service's memory, an S3 listing) is an answer.
 */
function decision(upstreams: string, path: string, secret: string, copies: string[], onAllow: string[] = []): string[] {
  return [
    // Only the decision sets these: a reader's own are dropped first.
    ...copies.map((h) => `request_header -${h}`),
    ...block(`reverse_proxy ${upstreams}`, [
      'method GET',
      `rewrite ${path}`,
      `header_up ${EDGE_SECRET_HEADER} "${secret}"`,
      'header_up X-Forwarded-Method {method}',
      'header_up X-Forwarded-Uri {uri}',
      ...BALANCED,
      `@allow header ${EDGE_HEADERS.path} *`,
      ...block('handle_response @allow', [
        // Copied only when the decision gave them (as forward_auth does): an empty header is absent.
        ...copies.flatMap((h, i) => [`@given${i} not vars {rp.header.${h}} ""`, `request_header @given${i} ${h} {rp.header.${h}}`]),
        ...onAllow,
      ]),
    ]),
  ];
}

/**
 * S3: every GET is first a decision of the S3 surface (api/s3/edge.ts). When it allows the
 * edge to serve an object's bytes, its headers (the object's) are the reader's and the bytes
 * (the range it names) come from Kubo. Other methods go to the API's S3 as a whole: uploads
 * keep their path through the API.
 */
function s3Routes(options: EdgeOptions): string[] {
  const decisions = options.apis.map((a) => a.s3).join(' ');
  const { path, range } = EDGE_HEADERS;
  const route = [
    ...decision(
      decisions,
      EDGE_S3_DECISION_PATH,
      options.secret,
      [path, range],
      [...block('copy_response_headers', [`exclude Content-Length Date Connection Keep-Alive ${path} ${range}`])],
    ),
    'request_header -Range',
    `@ranged header_regexp ${range} ^bytes=`,
    `request_header @ranged Range {http.request.header.${range}}`,
    `rewrite * {http.request.header.${path}}`,
    ...kuboRelay(options.kuboGateways, 's3'),
  ];
  return [
    '@read method GET',
    ...block('handle @read', block('route', route)),
    ...block('handle', block(`reverse_proxy ${decisions}`, BALANCED)),
  ];
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
    // A small answer the service marked as keepable, answered again here (answers.go).
    ...block('stupa_answers', [
      `ttl ${EDGE_ANSWER_TTL_MS}ms`,
      `max_answer ${ANSWER_MAX_BYTES}`,
      `max_total ${ANSWER_MEMORY_BYTES}`,
      `keep_header ${EDGE_KEEP_HEADER}`,
    ]),
    ...decision(decisions, EDGE_DECISION_PATH, options.secret, copies),
    ...(options.reports ? [`log_append account {http.request.header.${EDGE_HEADERS.account}}`] : []),
    ...responseHeaders.flatMap(([name, copy, header]) => [
      `@${name} header ${copy} *`,
      ...block(`header @${name}`, [`${header} "{http.request.header.${copy}}"`, 'defer']),
    ]),
    `@vary header ${EDGE_HEADERS.vary} *`,
    ...block('header @vary', [`+Vary "{http.request.header.${EDGE_HEADERS.vary}}"`, 'defer']),
    `rewrite * {http.request.header.${EDGE_HEADERS.path}}`,
    ...kuboRelay(options.kuboGateways, 'gateway'),
  ];
  return [
    '@read method GET HEAD',
    ...block('handle @read', block('route', route)),
    ...block('handle', block(`reverse_proxy ${decisions}`, BALANCED)),
    ...(options.reports
      ? block('log', [
          ...block(`output net ${options.reports}`, ['dial_timeout 2s', 'soft_start']),
          // The reader's URI (it may carry a gateway token) and headers never leave the edge.
          ...block('format filter', ['wrap json', ...block('fields', ['request delete', 'resp_headers delete', 'user_id delete'])]),
        ])
      : []),
  ];
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
    // Before anything else: an interim 100 Continue at once, for every request that asks
    // (edge/caddy/continue.go: else a refusal could leave both sides waiting).
    'order stupa_continue first',
    'order stupa_body_errors after stupa_continue',
    ...block('servers', [
      // Go's own answers to requests it cannot parse, in each surface's error shape (errors.go);
      // before TLS, where it changes nothing (`tls` named, or Caddy would put it first).
      ...block('listener_wrappers', [...(tls ? ['stupa_errors'] : block('stupa_errors', [`xml ${ports.s3}`])), 'tls']),
      // Plain HTTP is HTTP/1.1 only: with h2c on, Go's server waits for the 24 bytes of an HTTP/2
      // preface before it reads a shorter request, so a few bytes of garbage were answered only
      // at the header timeout (10 s). Over TLS, HTTP/2 comes by ALPN as always.
      ...(tls ? [] : ['protocols h1']),
      'timeouts {',
      '\tread_header 10s',
      '\tidle 2m',
      '}',
    ]),
    // Why the edge answered an error itself (an upstream refused, reset or none is up): Caddy logs
    // an error its handle_errors answered only at DEBUG, so without this the log says nothing of
    // the 503s it gave. To stderr, which is the edge's log (DATA_DIR/logs/edge.log); without the
    // request's headers (X-Api-Key, X-Gateway-Token) and query (presigned URLs' signatures, tokens).
    ...block('log edge-errors', [
      'level DEBUG',
      'include http.log.error',
      ...block('format filter', ['wrap json', ...block('fields', ['request>headers delete', 'request>uri regexp "\\?.*$" ""'])]),
    ]),
  ];
  const siteTls = (wildcard: boolean) =>
    !tls ? [] : tls.mode === 'internal' ? ['tls internal'] : wildcard ? block('tls', ['on_demand']) : [];
  const site = (address: string, lines: string[]) => ['', ...block(address, ['stupa_continue', 'stupa_body_errors', ...lines])];
  const api = block(`reverse_proxy ${apis('api')}`, [...BALANCED, ...HEALTH]);
  const s3 = s3Routes(options);
  const lines = tls
    ? [
        ...site(`https://${tls.apiHost}`, [...siteTls(false), ...noTunnel('json'), ...api, ...unavailable('json')]),
        ...site(`https://*.${tls.gatewayDomain}`, [
          ...siteTls(true),
          ...noTunnel('json'),
          ...gatewayRoutes(options),
          ...unavailable('json'),
        ]),
        ...site(`https://${tls.s3Domain}, https://*.${tls.s3Domain}`, [...siteTls(true), ...noTunnel('s3'), ...s3, ...unavailable('s3')]),
      ]
    : [
        ...site(`http://:${ports.api}`, [...noTunnel('json'), ...api, ...unavailable('json')]),
        ...site(`http://:${ports.gateway}`, [...noTunnel('json'), ...gatewayRoutes(options), ...unavailable('json')]),
        ...site(`http://:${ports.s3}`, [...noTunnel('s3'), ...s3, ...unavailable('s3')]),
      ];
  const purgeOnly = `this listener takes POST ${EDGE_PURGE_PATH} from the service's processes only`;
  const purge = ports.purge
    ? site(`http://:${ports.purge}`, [
        // Our handlers have no place in Caddy's directive order: in a route, they run as written.
        ...block(
          `handle ${EDGE_PURGE_PATH}`,
          block('route', block('stupa_answers_purge', [`secret "${options.secret}"`, `secret_header ${EDGE_SECRET_HEADER}`])),
        ),
        ...block('handle', ['error 404']),
        ...block('handle_errors', [
          'header Content-Type "application/json; charset=utf-8"',
          `respond \`{"error":{"reason":"EDGE_PURGE_REFUSED","details":"${purgeOnly}"}}\` {err.status_code}`,
        ]),
      ])
    : [];
  return ['{', ...global.map((l) => `\t${l}`), '}', ...lines, ...purge, ''].join('\n');
}
