// What the edge (infra/edge/caddyfile.ts) and the service's gateway (api/gateway/edge.ts) agree
// on: where the edge asks, how it proves it is the edge, and the headers of an allowing
// decision, which the edge copies into its request to Kubo's gateway and its access log.
export const EDGE_DECISION_PATH = '/_edge/gateway';
/** Caddy's on-demand TLS asks here whether a name is the service's (api/usecases/edge.ts). */
export const EDGE_TLS_ASK_PATH = '/_edge/tls-ask';
export const EDGE_SECRET_HEADER = 'x-stupa-edge-secret';

/** The headers of an allowing decision, copied by the edge into its request to Kubo's gateway. */
export const EDGE_HEADERS = {
  account: 'X-Stupa-Account',
  path: 'X-Stupa-Path',
  /** What replaces `/ipfs/<cid>` in X-Ipfs-Path and Location: the reader's `/ipns/<name>` or `/folders/<name>`. */
  prefix: 'X-Stupa-Prefix',
  /** For /ipns and /folders: the Cache-Control the reader gets (the name's lifetime, not the content's). */
  cache: 'X-Stupa-Cache',
  corsOrigin: 'X-Stupa-Cors-Origin',
  corsExpose: 'X-Stupa-Cors-Expose',
  corsMethods: 'X-Stupa-Cors-Methods',
  vary: 'X-Stupa-Vary',
} as const;
