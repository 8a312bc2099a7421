// What the edge (edge/caddyfile.ts) and the service's surfaces (api/gateway/edge.ts,
// api/s3/edge.ts) agree on: where the edge asks, how it proves it is the edge, and the headers
// of an allowing decision, which the edge copies into its request to Kubo's gateway and its
// access log.
export const EDGE_DECISION_PATH = '/_edge/gateway';
/** S3's decision, on the S3 port: a GET as the reader sent it (its method and URI in X-Forwarded-*). */
export const EDGE_S3_DECISION_PATH = '/_edge/s3';
/** Caddy's on-demand TLS asks here whether a name is the service's (core/edge.ts). */
export const EDGE_TLS_ASK_PATH = '/_edge/tls-ask';
/** Where an edge's purge listener (EDGE_PURGE_URLS) takes the accounts whose kept answers it forgets. */
export const EDGE_PURGE_PATH = '/_edge/purge';
export const EDGE_SECRET_HEADER = 'x-stupa-edge-secret';
/** On an answer of the service's own: the edge may keep it (edge/caddy/answers.go) and
 * answer the same read again itself, metered against the account this names. */
export const EDGE_KEEP_HEADER = 'X-Stupa-Keep';

/**
 * How long an API surface keeps an idle keep-alive connection (api/listen.ts), and how long the
 * edge keeps one to it: the edge lets go first. Were it the API (Node's default 5 s against
 * Caddy's 2 min), a request the edge sent on a connection as the API closed it met a reset, and
 * Caddy does not resend a POST that may have arrived: the client got a 503 (schemathesis through
 * the edge met two in about 17,000 requests; the one the edge logged was `read: connection reset
 * by peer`, and 23,000 more after this change met none).
 */
export const API_KEEPALIVE_MS = 5_000;
export const EDGE_UPSTREAM_KEEPALIVE_MS = 3_000;

/** The headers of an allowing decision, copied by the edge into its request to Kubo's gateway. */
export const EDGE_HEADERS = {
  account: 'X-Stupa-Account',

  /** The path (and query, possibly empty) to ask Kubo's gateway for; its presence is the "allowed". */
  path: 'X-Stupa-Path',
  /** S3: the Range to ask Kubo for (`bytes=<first>-<last>`), or `none` for the whole content. */
  range: 'X-Stupa-Range',
  /** What replaces `/ipfs/<cid>` in X-Ipfs-Path and Location: the reader's `/ipns/<name>` or `/folders/<name>`. */
  prefix: 'X-Stupa-Prefix',
  /** For /ipns and /folders: the Cache-Control the reader gets (the name's lifetime, not the content's). */
  cache: 'X-Stupa-Cache',
  corsOrigin: 'X-Stupa-Cors-Origin',
  corsExpose: 'X-Stupa-Cors-Expose',
  corsMethods: 'X-Stupa-Cors-Methods',
  vary: 'X-Stupa-Vary',
} as const;
