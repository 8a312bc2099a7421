// Defaults in one place (helia style). Environment variables override the ones config.ts reads.
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 3000;
export const DEFAULT_DATA_DIR = './data';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
export const DEFAULT_TASK_QUEUE = 'stupa';
export const DEFAULT_JSON_BODY_LIMIT = '1mb';
export const DEFAULT_LOG_LEVEL = 'info';
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
/** The ports of `npm start`'s stack are this base plus fixed offsets (infra/stack/stack.ts). */
export const DEFAULT_STACK_PORT_BASE = 17000;

/** API keys: `stp_` + 32 base62 characters (about 190 bits); `keyPrefix` is the first 12. */
export const API_KEY_PREFIX = 'stp_';
export const API_KEY_RANDOM_LENGTH = 32;
export const API_KEY_PREFIX_LENGTH = 12;
/** Longest `expiresIn` accepted for an API key: ten years, in seconds. */
export const API_KEY_MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600;

/** Rate limits count requests per key in fixed one-minute windows. */
export const RATE_WINDOW_MS = 60_000;
/** How often `lastUsedAt` values gathered in memory are written to MongoDB. */
export const LAST_USED_FLUSH_MS = 5_000;
/** How long a dependency check of /readyz may take before the dependency counts as down. */
export const READY_CHECK_TIMEOUT_MS = 2_000;
/** Seconds a client is asked to wait when a dependency is down (503). */
export const RETRY_AFTER_UNAVAILABLE_S = 5;

/** Defaults of list endpoints that are not plain arrays (decisions.md, "Lists"). */
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 1000;
