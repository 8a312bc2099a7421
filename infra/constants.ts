// Defaults in one place (helia style). Environment variables override the ones config.ts reads.
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 3000;
export const DEFAULT_DATA_DIR = './data';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
export const DEFAULT_TASK_QUEUE = 'stupa';
/** How long a namespace Stupa registers keeps closed workflows' histories (TEMPORAL_RETENTION_DAYS). */
export const DEFAULT_TEMPORAL_RETENTION_DAYS = 7;
/** `auto`: the worker registers the namespace and search attributes it needs at start; `off`: it only checks them. */
export const DEFAULT_TEMPORAL_SETUP = 'auto';
/** The Worker Deployment the workers poll as (WORKER_DEPLOYMENT_NAME): one per service. */
export const DEFAULT_WORKER_DEPLOYMENT = 'stupa';
/** How long a starting worker keeps trying to make its build current: Temporal knows a version
 * only once its pollers have reached the server (measured: within a second on loopback). */
export const WORKER_PROMOTE_WAIT_MS = 60_000;
/** A freshly registered namespace reaches every frontend and history service of a Temporal
 * cluster with their namespace caches' refresh (about 10 s): adding its search attributes is
 * retried this long, and their listing awaited. */
export const TEMPORAL_SETUP_WAIT_MS = 60_000;
/** A passed check of the namespace and search attributes (/readyz) is trusted this long; the
 * frontend itself is still asked at every probe. */
export const TEMPORAL_SETUP_CHECK_MEMORY_MS = 60_000;
export const DEFAULT_JSON_BODY_LIMIT = '1mb';
/** JSON uploads (`POST /upload/new` with `content`) may be larger than other JSON bodies. */
export const DEFAULT_UPLOAD_JSON_LIMIT = '10mb';
/** A pin whose content is not fetched within this ends `failed` with reason TIMEOUT. */
export const DEFAULT_PIN_TIMEOUT = '24h';
/** Every IPNS name's current record is signed and stored again this often (records are valid 48 h). */
export const DEFAULT_IPNS_REPUBLISH_INTERVAL = '4h';
export const DEFAULT_LOG_LEVEL = 'info';
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
/** Temporal's default workflow task timeout: how long the server waits for a task's answer. */
export const WORKFLOW_TASK_TIMEOUT_MS = 10_000;
/** On SIGTERM the API keeps serving this long with /readyz at 503 and every answer closing its
 * connection, before it stops listening: the edge marks it down after two failed checks 2 s apart
 * (edge/caddyfile.ts), so by then it sends nothing more (SHUTDOWN_DRAIN_MS). */
export const DEFAULT_SHUTDOWN_DRAIN_MS = 5_000;
/** The share of its time a background data migration works: after each page it rests as long as
 * the page took (MIGRATION_PACE; infra/db/migrations/runner.ts). */
export const DEFAULT_MIGRATION_PACE = 0.5;
/** The ports of `npm start`'s stack are this base plus fixed offsets (stack/stack.ts). */
export const DEFAULT_STACK_PORT_BASE = 17000;

/** API keys: `stp_` + 32 base62 characters (about 190 bits); `keyPrefix` is the first 12. */
export const API_KEY_PREFIX = 'stp_';
export const API_KEY_RANDOM_LENGTH = 32;
export const API_KEY_PREFIX_LENGTH = 12;
/** Shortest and longest `expiresIn` accepted for an API key: a minute and ten years, in seconds. */
export const API_KEY_MIN_EXPIRES_IN_S = 60;
export const API_KEY_MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600;

/** Signed upload tokens: `sup_` + 32 base62 characters; `tokenPrefix` is the first 12; IDs are `sut_` + 16. */
export const SIGNED_TOKEN_PREFIX = 'sup_';
export const SIGNED_TOKEN_RANDOM_LENGTH = 32;
export const SIGNED_TOKEN_PREFIX_LENGTH = 12;
export const SIGNED_TOKEN_ID_PREFIX = 'sut_';
/** A signed token's `expiresIn`: default an hour, at most 7 days (docs/api/contract.md, "Signed upload tokens"), in seconds. */
export const SIGNED_TOKEN_DEFAULT_EXPIRES_IN_S = 3600;
export const SIGNED_TOKEN_MAX_EXPIRES_IN_S = 7 * 24 * 3600;
/** Bytes read from the start of content to recognise its type (file-type's own need): signed uploads, image sources. */
export const SNIFF_BYTES = 4100;
/** Content found held is not checked again for this long (core/held.ts): the gateway and /image. */
export const HELD_MEMORY_MS = 1_000;

/** Gateway tokens: `gwt_` + 32 base62 characters; the 12-character prefix names one. */
export const GATEWAY_TOKEN_PREFIX = 'gwt_';
export const GATEWAY_TOKEN_RANDOM_LENGTH = 32;
export const GATEWAY_TOKEN_PREFIX_LENGTH = 12;
/** Gateway tokens an account may have at once. */
export const GATEWAY_TOKENS_MAX = 100;

/** The gateway and S3 GetObject each keep complete answers of immutable content up to this size in memory, this much each (api/answers.ts). */
export const ANSWER_MAX_BYTES = 64 * 1024;
export const ANSWER_MEMORY_BYTES = 64 * 1024 * 1024;
/** How long the edge answers a read again from what the API marked as keepable
 * (edge/caddy/answers.go): as long as the API remembers a hold, so a released hold stops
 * reads within the same bound. Changes of access rules purge the edge's answers at once. */
export const EDGE_ANSWER_TTL_MS = HELD_MEMORY_MS;
/** How long the API waits for an edge to forget an account's answers (edge/purge.ts). */
export const EDGE_PURGE_TIMEOUT_MS = 2_000;
/** How much of a refused S3 request's body is still read and dropped so the answer reaches a
 * proxy in front, which writes the body before it reads (api/s3/app.ts); past it, the
 * connection is cut. */
export const REFUSED_BODY_DRAIN_BYTES = 64 * 1024 * 1024;
/** Seconds a reader may cache a gateway answer by folder name (`/folders/<name>/…`): a new snapshot moves it. */
export const FOLDER_PATH_TTL_S = 60;
/** Gateway bytes are written to the account's day this often, summed in memory between. */
export const BANDWIDTH_FLUSH_MS = 1_000;
/** The month's gateway bytes are read from MongoDB at most this often per account and process. */
export const BANDWIDTH_MEMORY_MS = 2_000;
/** The gateway's port, and the domain whose subdomains are accounts' gateways (`<slug>.<domain>`). */
export const DEFAULT_GATEWAY_PORT = 3080;
export const DEFAULT_GATEWAY_DOMAIN = 'localhost';

/** The S3 interface's port, the domain whose subdomains are buckets, the region it names. */
export const DEFAULT_S3_PORT = 3900;
export const DEFAULT_S3_DOMAIN = 'localhost';
export const DEFAULT_S3_REGION = 'us-east-1';
/** A multipart upload untouched this long is aborted by the cleanup (its parts' bytes given back). */
export const DEFAULT_S3_MULTIPART_MAX_AGE = '7d';
/** How often the cleanup of abandoned multipart uploads runs. */
export const S3_MULTIPART_CLEANUP_EVERY = '1h';
/** Buckets an account may have (S3's own default). */
export const S3_BUCKETS_MAX = 100;
/** S3's limits: a PutObject or a part at most 5 GiB; parts at least 5 MiB but the last; 10,000 parts; objects at most 5 GB
 * (the contract), read as S3 means its own "5 GB": 5 GiB (5,368,709,120 bytes). */
export const S3_MAX_PUT_BYTES = 5 * 1024 ** 3;
export const S3_MIN_PART_BYTES = 5 * 1024 ** 2;
export const S3_MAX_PARTS = 10_000;
export const S3_MAX_OBJECT_BYTES = 5 * 1024 ** 3;
/** Keys of one DeleteObjects deleted at once: each is several round trips (its record, the
 * storage count, the hold change and Cluster's unpin), so one after another 1,000 keys took 37 s,
 * close to the aws CLI's 60 s read timeout. */
export const S3_DELETE_CONCURRENCY = 16;
/** A bucket's delete mark older than this is a delete that died between marking the bucket and
 * deleting it (two MongoDB operations apart): writes stop waiting for it (core/s3/buckets.ts). */
export const S3_BUCKET_DELETE_MARK_MS = 60_000;
/** Keys listed per page at most (S3's max-keys). */
export const S3_MAX_KEYS = 1000;

/** Rate limits count requests per key in fixed one-minute windows. */
export const RATE_WINDOW_MS = 60_000;
/**
 * API keys and users found by a process are read again after this long. A plan changed through
 * the same process counts at once; through another, within this time. A key's deletion answers
 * only after this time, so a deleted key is refused by every process once that is answered.
 */
export const AUTH_MEMORY_MS = 1_000;

/** How long an upload may go by the storage counter as last read, when it leaves room
 * (core/content.ts quickStorageLeft): the reservation decides anyway. */
export const USAGE_MEMORY_MS = 1_000;
/** How often `lastUsedAt` values gathered in memory are written to MongoDB. */
export const LAST_USED_FLUSH_MS = 5_000;
/** How long a dependency check of /readyz may take before the dependency counts as down. */
export const READY_CHECK_TIMEOUT_MS = 2_000;
/** Seconds a client is asked to wait when a dependency is down (503). */
export const RETRY_AFTER_UNAVAILABLE_S = 5;

/** Defaults of list endpoints that are not plain arrays (docs/api/contract.md, "Lists"). */
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 1000;

/** Pins: how often the cluster status is polled, and the origins re-dialled (with backoff). */
export const PIN_POLL_MS = 500;
/** How long a pin's first step waits for Cluster before handing over to the long wait: local
 * content is pinned well within it. */
export const QUICK_PIN_WAIT_MS = 3_000;
/** How long POST /pin waits for Cluster to pin content Kubo already has before it hands the
 * request to the pin workflow (core/pins.ts): the client waits this long at most. */
export const PIN_INLINE_WAIT_MS = 1_000;
/** A request still `queued` this long after it was made has no pin workflow taking it on (the API
 * died pinning it inline, or Temporal was down): the sweep starts one, and the audit reports it. */
export const PIN_STALLED_MS = 60_000;
/** How long an upload waits, after its content is pinned on the peer that added it, for
 * Cluster to report CLUSTER_REPLICATION_MIN peers pinned (measured: about 60 ms on loopback).
 * Past it the upload is answered anyway: the content is on the adding peer and Cluster goes on
 * replicating it. */
export const REPLICATION_WAIT_MS = 10_000;
/** How long GET /pin/:cid waits for Cluster's view of the content's peers before answering
 * without it (`peers: null`). */
export const PEERS_TIMEOUT_MS = 2_000;
/** A settled view of a content's peers (each `pinned` or `remote`) is answered again for this
 * long (core/peers.ts): clients polling a pin share one Cluster call. */
export const PEERS_MEMORY_MS = 1_000;
export const ORIGIN_REDIAL_MIN_MS = 1_000;
export const ORIGIN_REDIAL_MAX_MS = 30_000;

/** Files: metadata is at most 10 string keys of [A-Za-z0-9_]{1,64}, values of at most 256 characters. */
export const METADATA_MAX_KEYS = 10;
export const METADATA_MAX_VALUE = 256;
/** Files: how many of a CID's files a 409 names when a route given the CID cannot choose. */
export const FILES_NAMED_IN_CONFLICT = 10;

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

/** Directories of the same profile (infra/ipfs/unixfs.ts): a directory whose plain block would be
 * larger than this many bytes becomes a HAMT of this fanout. */
export const HAMT_THRESHOLD_BYTES = 262_144;
export const HAMT_FANOUT = 256;
/** IPNS records (infra/ipfs/ipns.ts): valid 48 h from signing, cached by resolvers for 5 min. */
export const IPNS_RECORD_VALIDITY_MS = 48 * 60 * 60 * 1000;
export const IPNS_RECORD_TTL_MS = 5 * 60 * 1000;
/** Resolving a name this service does not hold, through Kubo. */
export const IPNS_RESOLVE_TIMEOUT_MS = 5_000;
/** How long storing a record in Kubo may take (a publish, a republish). */
export const IPNS_STORE_TIMEOUT_MS = 20_000;
/** After a contested store (infra/ipfs/ipns.ts `storeIpnsRecord`), when Kubo's record is looked at
 * again: a lower put of another process can still land after the first look. */
export const IPNS_RECHECKS_MS = [1_000, IPNS_STORE_TIMEOUT_MS];
/** Names' signing keys a process keeps ready (infra/ipfs/ipns.ts), least recently used beyond it:
 * about 1 KB each. */
export const IPNS_SIGNING_KEYS_KEPT = 10_000;
/** A DNSLink check's DNS lookup. */
export const DNSLINK_TIMEOUT_MS = 2_000;

/** GET /image/:cid (core/images.ts): the derivatives' disk cache, in MB (LRU beyond it). */
export const DEFAULT_IMAGE_CACHE_MB = 1024;
/** Largest source read from Kubo to transform, in MB. */
export const DEFAULT_IMAGE_MAX_SOURCE_MB = 50;
/** Largest source in pixels (all frames of an animation), checked from the header before any
 * decoding: a 50 MP photo decodes to 150-200 MB; a decompression bomb claims billions. */
export const DEFAULT_IMAGE_MAX_PIXELS = 50_000_000;
/** Transforms waiting for a slot beyond IMAGE_CONCURRENCY running; more are refused with 503. */
export const DEFAULT_IMAGE_QUEUE = 32;
/** Sources kept in memory after a transform, for the other sizes and formats asked for next. */
export const IMAGE_SOURCE_MEMORY_BYTES = 64 * 1024 * 1024;
/** AVIF encoding effort (0-9): sharp's default 4 took 2.3 s for an 800x600 photo here, 2 took 0.2 s. */
export const IMAGE_AVIF_EFFORT = 2;

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
/**
 * Each sweep round checks again the changes this long before its watermark. A Cluster peer
 * killed with SIGKILL forgets the pins and unpins it acknowledged in its last seconds (measured
 * by `npm run chaos`: about 20 of 800 under load); a round that had already seen them pinned
 * would have moved past them. Rounds fail while Cluster is down, so the watermark waits, and
 * the first round after a restart, however long the outage, looks back over the crash.
 */
export const HOLD_CHANGE_RECHECK_MS = 2 * 60_000;
/** How long a request whose record is written retries the steps that complete it while
 * MongoDB does not answer (core/content.ts, completing). */
export const RECORD_COMPLETION_MS = 15_000;
/** How long an insert whose answer was lost (the connection closed under it) is sent again
 * while MongoDB does not answer (infra/db/errors.ts, resending): the driver's 5 s server
 * selection of each sending comes on top. */
export const UNANSWERED_WRITE_RESEND_MS = 5_000;
/** By this long after it logged its change, a request has completed the counters the change
 * moves, or its process is dead (a single write fails within the driver's 5 s server selection). */
export const WRITER_SETTLE_MS = RECORD_COMPLETION_MS + UNANSWERED_WRITE_RESEND_MS + 5_000;
/** An API process writes a beat this often (infra/db/processes.ts); one that has not beaten for
 * PROCESS_GONE_AFTER_MS is gone, and its beat is forgotten after PROCESS_FORGET_AFTER_MS. */
export const PROCESS_BEAT_MS = 2_000;
export const PROCESS_GONE_AFTER_MS = 10_000;
export const PROCESS_FORGET_AFTER_MS = 24 * 60 * 60_000;
/** The sweep checks the counters a logged change moves (activities/counts.ts) once it is this
 * old: its request has settled, or its process is dead and has missed its beats; what differs is
 * looked at again after the second look. */
export const COUNT_CHECK_AFTER_MS = WRITER_SETTLE_MS + PROCESS_GONE_AFTER_MS;
export const COUNT_SECOND_LOOK_MS = 2_000;
/** Logged changes whose counters the sweep compares with one set of queries. */
export const COUNT_CHECK_PAGE = 200;
/** Rounds a full sync goes before it gives up (its caller retries): a round goes again only when
 * the holds changed between its own pin or unpin and the read after it (core/hold-sync.ts). */
export const SYNC_ROUNDS = 5;
/** Log entries read per query by a sweep round. */
export const HOLD_CHANGE_PAGE = 1_000;
/** Rows per multihash a batched "does any record hold it" read takes (infra/db/holds.ts): content
 * held by more records than that may fill the batch, and what it left out is asked one by one. */
export const HELD_ROWS_PER_MULTIHASH = 4;

/** GET /analytics (core/analytics.ts): the default period, in UTC days up to today, and
 * the longest one (a year of day documents, infra/db/analytics.ts, is the most one request reads). */
export const ANALYTICS_DEFAULT_DAYS = 30;
export const ACTIVITY_MAX_DAYS = 366;
/**
 * A user's storage counter is rebuilt from the records once (a user from before distinct
 * counting, infra/db/usage.ts) or by `usage recount`, under a lock: requests of that user wait
 * up to the wait for it; a rebuild still running after the lock's time could be joined by a
 * second one, so it is generous.
 */
export const USAGE_REBUILD_LOCK_MS = 10 * 60_000;
export const USAGE_REBUILD_WAIT_MS = 60_000;
/** A recount beside traffic (infra/db/usage.ts) waits this long after it stops new writes of
 * the user: writes begun before finish within it (a record's insert is resent for
 * UNANSWERED_WRITE_RESEND_MS, the steps after it retry for RECORD_COMPLETION_MS; a single
 * write fails within the driver's 5 s server selection). */
export const USAGE_RECOUNT_SETTLE_MS = 2 * RECORD_COMPLETION_MS;
/** ... or until the user's counters have stood still this long, looked at this often: a writer
 * between its reservation and its holding step, with MongoDB answering, takes milliseconds, and
 * the retries of a step wait at most 2 s between tries (core/content.ts). */
export const USAGE_RECOUNT_QUIET_MS = 5_000;
export const USAGE_RECOUNT_LOOK_MS = 500;
/** Records of each kind a rebuild or the audit reads of one user at a time (infra/db/usage-tally.ts). */
export const USAGE_TALLY_PAGE = 1000;
/** Characters of a user's gateway slug (infra/db/gateway-slugs.ts): a letter, then [a-z0-9]. */
export const GATEWAY_SLUG_LENGTH = 12;
/** A slug's owner, once found, is remembered this long per process (owners never change). */
export const SLUG_MEMORY_MS = 60_000;
export const CHUNK_BYTES = 1_048_576; // the profile's chunker (UNIXFS_ADD_OPTIONS), for files assembled from parts (infra/ipfs/unixfs-file.ts)
export const MAX_FILE_LINKS = 1024; // and its max-file-links

/** Records an audit reads a page at a time, and Cluster or Kubo lookups it has in flight. */
export const AUDIT_PAGE = 500;
export const AUDIT_CONCURRENCY = 16;
/** A count that differs is looked at again after this long before it is reported: a write in
 * flight (a reservation, a record whose count is being stepped) is not a disagreement. */
export const AUDIT_SECOND_LOOK_MS = 1000;
/** How far before a backup's `takenAt` a pin's `at` still counts as made after it: the two
 * times come from different machines' clocks (infra/db/restores.ts, core/restores.ts). */
export const RESTORE_CLOCK_MARGIN_MS = 60_000;
/** Restores read at most (the newest): one document per restore ever made. */
export const RESTORES_READ = 1000;

/** Webhooks (core/webhooks.ts, activities/webhooks.ts). IDs are `wh_…`, deliveries
 * `dlv_…` and events `msg_…` (the `webhook-id` a receiver de-duplicates by). */
export const WEBHOOK_ID_PREFIX = 'wh_';
export const WEBHOOK_DELIVERY_ID_PREFIX = 'dlv_';
export const WEBHOOK_EVENT_ID_PREFIX = 'msg_';
/** Endpoints a plan allows when its plans file does not say (infra/plans.ts). */
export const DEFAULT_PLAN_WEBHOOKS = 10;
/** How long a delivery is retried, and an endpoint may fail, before it is given up (about three
 * days, as receivers of Standard Webhooks expect); WEBHOOK_RETRY_PERIOD shortens it for tests. */
export const DEFAULT_WEBHOOK_RETRY_PERIOD = '3d';
/** The waits between attempts, as fractions of the retry period: for 3 days, 5 s, 5 min, 30 min,
 * 2 h, 5 h, then 10 h until the period ends (the schedule hosted webhook services use). */
export const WEBHOOK_RETRY_FRACTIONS = [5 / 259_200, 300 / 259_200, 1_800 / 259_200, 7_200 / 259_200, 18_000 / 259_200, 36_000 / 259_200];
/** Connect within 5 s and have the whole answer within 10 s, per attempt. */
export const WEBHOOK_CONNECT_TIMEOUT_MS = 5_000;
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Characters of a receiver's answer kept with an attempt, and attempts kept per delivery. */
export const WEBHOOK_RESPONSE_KEEP_CHARS = 256;
export const WEBHOOK_ATTEMPTS_KEPT = 20;
/** While events keep arriving, an endpoint's round looks for more this often, rather than ending. */
export const WEBHOOK_POLL_MS = 250;
/** A round woken by an event keeps looking this long from its start, even when a look finds
 * nothing; a recorder that signalled the job needs no other signal for the events it records in
 * that time (core/webhook-events.ts `wakeFor`), so a stream of events costs about one signal a
 * second rather than one per WEBHOOK_WAKE_DELAY_MS. */
export const WEBHOOK_ROUND_LINGER_MS = 1_000;
/** Deliveries one pass of an endpoint's round looks at, in order, and how long a round runs. */
export const WEBHOOK_ROUND_DELIVERIES = 100;
export const WEBHOOK_ROUND_MS = 30_000;
/** A recorder waits this long before it wakes a sleeping endpoint's job, so that the events of a
 * burst are sent in one round rather than a round each (a round costs Temporal and the worker a
 * few milliseconds of CPU: npm run bench). The delay an event's delivery may have for it. */
export const WEBHOOK_WAKE_DELAY_MS = 200;
/** Finished deliveries are kept in the log this long. */
export const WEBHOOK_LOG_RETENTION_MS = 30 * 86_400_000;

/** The API process's old-generation heap may grow by this percent over what its last full
 * collection kept before the next one starts (V8's --heap-growing-percent): see api/main.ts. */
export const API_HEAP_GROWING_PERCENT = 100;
