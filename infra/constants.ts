// Defaults in one place (helia style). Environment variables override the ones config.ts reads.
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 3000;
export const DEFAULT_DATA_DIR = './data';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
export const DEFAULT_TASK_QUEUE = 'stupa';
export const DEFAULT_JSON_BODY_LIMIT = '1mb';
/** JSON uploads (`POST /upload/new` with `content`) may be larger than other JSON bodies. */
export const DEFAULT_UPLOAD_JSON_LIMIT = '10mb';
/** A pin whose content is not fetched within this ends `failed` with reason TIMEOUT. */
export const DEFAULT_PIN_TIMEOUT = '24h';
/** Every IPNS name's current record is signed and stored again this often (records are valid 48 h). */
export const DEFAULT_IPNS_REPUBLISH_INTERVAL = '4h';
export const DEFAULT_GATEWAY_URL = 'http://127.0.0.1:8080';
export const DEFAULT_LOG_LEVEL = 'info';
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
/** The ports of `npm start`'s stack are this base plus fixed offsets (infra/stack/stack.ts). */
export const DEFAULT_STACK_PORT_BASE = 17000;

/** API keys: `stp_` + 32 base62 characters (about 190 bits); `keyPrefix` is the first 12. */
export const API_KEY_PREFIX = 'stp_';
export const API_KEY_RANDOM_LENGTH = 32;
export const API_KEY_PREFIX_LENGTH = 12;
/** Shortest and longest `expiresIn` accepted for an API key: a minute and ten years, in seconds. */
export const API_KEY_MIN_EXPIRES_IN_S = 60;
export const API_KEY_MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600;

/** Rate limits count requests per key in fixed one-minute windows. */
export const RATE_WINDOW_MS = 60_000;
/**
 * API keys and users found by a process are read again after this long. A key deleted or a
 * plan changed through the same process counts at once; through another, within this time.
 */
export const AUTH_MEMORY_MS = 1_000;
/** How often `lastUsedAt` values gathered in memory are written to MongoDB. */
export const LAST_USED_FLUSH_MS = 5_000;
/** How long a dependency check of /readyz may take before the dependency counts as down. */
export const READY_CHECK_TIMEOUT_MS = 2_000;
/** Seconds a client is asked to wait when a dependency is down (503). */
export const RETRY_AFTER_UNAVAILABLE_S = 5;

/** Defaults of list endpoints that are not plain arrays (decisions.md, "Lists"). */
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 1000;

/** Pins: how often the cluster status is polled, and the origins re-dialled (with backoff). */
export const PIN_POLL_MS = 500;
/** How long a pin's first step waits for Cluster before handing over to the long wait: local
 * content is pinned well within it. */
export const QUICK_PIN_WAIT_MS = 3_000;
export const ORIGIN_REDIAL_MIN_MS = 1_000;
export const ORIGIN_REDIAL_MAX_MS = 30_000;

/** Files: metadata is at most 10 string keys of [A-Za-z0-9_]{1,64}, values of at most 256 characters. */
export const METADATA_MAX_KEYS = 10;
export const METADATA_MAX_VALUE = 256;

/** The unixfs-v1-2025 import profile (IPIP-0499), passed explicitly to Kubo's add so a Kubo
 * without the profile still gives the same CIDs. */
export const UNIXFS_ADD_OPTIONS = {
  'cid-version': 1,
  'raw-leaves': true,
  chunker: 'size-1048576',
  hash: 'sha2-256',
  'max-file-links': 1024,
  trickle: false,
} as const;

/** Directories of the same profile (infra/unixfs.ts): a directory whose plain block would be
 * larger than this many bytes becomes a HAMT of this fanout. */
export const HAMT_THRESHOLD_BYTES = 262_144;
export const HAMT_FANOUT = 256;
/** IPNS records (infra/ipns.ts): valid 48 h from signing, cached by resolvers for 5 min. */
export const IPNS_RECORD_VALIDITY_MS = 48 * 60 * 60 * 1000;
export const IPNS_RECORD_TTL_MS = 5 * 60 * 1000;
/** Resolving a name this service does not hold, through Kubo. */
export const IPNS_RESOLVE_TIMEOUT_MS = 5_000;
/** How long storing a record in Kubo may take (a publish, a republish). */
export const IPNS_STORE_TIMEOUT_MS = 20_000;
/** A DNSLink check's DNS lookup. */
export const DNSLINK_TIMEOUT_MS = 2_000;

/** Queries at once reading the files of a folder tree (infra/db/folder-tree.ts). */
export const LIST_QUERIES = 4;
/** A snapshot's listing is kept for its job (infra/db/snapshot-listings.ts) when it deflates
 * to at most this many bytes (about 100,000 files); one of a job that never started goes after a day. */
export const SNAPSHOT_LISTING_MAX_BYTES = 8 * 1024 * 1024;
export const SNAPSHOT_LISTING_TTL_MS = 24 * 60 * 60 * 1000;
/** Root blocks a snapshot reads at once, for files whose DAG size was not kept (activities/snapshots.ts). */
export const SNAPSHOT_ROOT_READS = 16;

/**
 * The sweep (activities/holds.ts) checks changes of holds stamped at least this long ago, so a
 * change whose log entry was stamped but not yet written (an insert in flight, a writer's
 * clock slightly behind the worker's) is not passed by the watermark before it is visible.
 */
export const HOLD_CHANGE_SETTLE_MS = 5_000;
/** Checked changes stay in the log this long behind the watermark before they are deleted, so
 * a round that started from an older watermark (a retry, a slower round) still finds them. */
export const HOLD_CHANGE_RETAIN_MS = 10 * 60_000;
/** Log entries read per query by a sweep round. */
export const HOLD_CHANGE_PAGE = 1_000;
