// The S3 interface: a surface of its own on S3_PORT, over the same use-cases as REST. A plain
// node:http handler (as the gateway: api/gateway/app.ts) that finds the bucket and key
// (path-style `/<bucket>/<key>` or virtual-host style `<bucket>.<S3_DOMAIN>`), verifies the
// SigV4 signature with the API key's secret (auth.ts), routes by method and subresource, and
// answers S3's XML; every failure is S3's XML error document (failures.ts maps use-case errors).
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { API_KEY_PREFIX_LENGTH, REFUSED_BODY_DRAIN_BYTES } from '../../infra/constants.js';
import { unseal } from '../../infra/secrets.js';
import { countRequest } from '../../core/access.js';
import { corsResponseHeaders, matchCorsRule, requestedHeaders, type CorsConfiguration } from '../../core/cors.js';
import type { Caller } from '../../core/deps.js';
import { getObjectAttributesHandler } from './attributes.js';
import { authenticate } from './auth.js';
import { takeEdgeDecision } from './edge.js';
import * as buckets from './buckets.js';
import type { S3Context, S3Deps } from './context.js';
import { S3Error, type S3ErrorCode } from './errors.js';
import { errorXml } from './xml.js';
import { toS3Error } from './failures.js';
import * as listing from './listing.js';
import * as multipart from './multipart.js';
import * as objects from './objects.js';

type Handler = (ctx: S3Context, bucket: string, key: string) => Promise<void>;
type BucketHandler = (ctx: S3Context, bucket: string) => Promise<void>;

/** Bucket configurations S3 has and this service does not: reading one answers S3's "none set". */
const UNSET_CONFIGURATIONS: Record<string, S3ErrorCode> = {
  policy: 'NoSuchBucketPolicy',
  lifecycle: 'NoSuchLifecycleConfiguration',
  tagging: 'NoSuchTagSet',
  encryption: 'ServerSideEncryptionConfigurationNotFoundError',
  website: 'NoSuchWebsiteConfiguration',
  replication: 'ReplicationConfigurationNotFoundError',
  ownershipControls: 'OwnershipControlsNotFoundError',
  publicAccessBlock: 'NoSuchPublicAccessBlockConfiguration',
};

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new S3Error('InvalidURI', 'Couldn’t parse the specified URI.');
  }
}

/** The bucket and key a request names (either may be null). */
function addressOf(req: IncomingMessage, domain: string): { bucket: string | null; key: string | null } {
  const path = (req.url ?? '/').split('?')[0]!;
  const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
  if (host.endsWith(`.${domain}`)) {
    const key = path.slice(1);
    return { bucket: host.slice(0, -domain.length - 1), key: key ? decode(key) : null };
  }
  const slash = path.indexOf('/', 1);
  const bucket = slash < 0 ? path.slice(1) : path.slice(1, slash);
  const key = slash < 0 ? '' : path.slice(slash + 1);
  return { bucket: bucket ? decode(bucket) : null, key: key ? decode(key) : null };
}

function route(method: string, q: URLSearchParams, bucket: string | null, key: string | null, headers: IncomingMessage['headers']) {
  if (bucket === null) return method === 'GET' ? { service: buckets.listAllBuckets } : undefined;
  if (key === null) {
    const on = (handler: BucketHandler) => ({ bucket: handler });
    const unset = Object.keys(UNSET_CONFIGURATIONS).find((name) => q.has(name));
    switch (method) {
      case 'GET':
        if (q.has('cors')) return on(buckets.getBucketCors);
        if (q.has('location')) return on(buckets.bucketLocation);
        if (q.has('versioning')) return on(buckets.bucketVersioning);
        if (q.has('object-lock')) return on(buckets.objectLockConfiguration);
        if (q.has('acl')) return on(buckets.getAcl);
        if (q.has('uploads')) return on(listing.listMultipartUploads);
        if (q.has('versions')) return on(listing.listObjectVersions);
        if (unset) return on(unsetConfiguration(UNSET_CONFIGURATIONS[unset]!));
        if (q.get('list-type') === '2') return on(listing.listObjectsV2);
        return on(listing.listObjectsV1);
      case 'HEAD':
        return on(buckets.headBucket);
      case 'PUT':
        if (q.has('cors')) return on(buckets.putBucketCors);
        if (q.has('acl')) return on(buckets.putAcl);
        if (q.has('object-lock')) return on(buckets.putObjectLockConfiguration);
        if ([...q.keys()].length > 0) return on(notImplemented);
        return on(buckets.putBucket);
      case 'DELETE':
        if (q.has('cors')) return on(buckets.deleteBucketCors);
        if ([...q.keys()].length > 0) return on(notImplemented);
        return on(buckets.removeBucket);
      case 'POST':
        if (q.has('delete')) return on(objects.deleteObjectsHandler);
        return on(notImplemented);
    }
    return undefined;
  }
  const on = (handler: Handler) => ({ object: handler });
  switch (method) {
    case 'GET':
      if (q.has('uploadId')) return on(multipart.listPartsHandler);
      if (q.has('acl')) return on(buckets.getAcl);
      if (q.has('attributes')) return on(getObjectAttributesHandler);
      if (q.has('retention') || q.has('legal-hold')) return on(buckets.objectLockOfObject);
      // Tags, and torrent files of objects (GetObjectTorrent), are not kept: not the object's bytes.
      if (q.has('tagging') || q.has('torrent')) return on(notImplemented);
      return on(objects.getObjectHandler);
    case 'HEAD':
      return on(objects.getObjectHandler);
    case 'PUT':
      if (q.has('uploadId') || q.has('partNumber')) return on(multipart.uploadPartHandler);
      if (q.has('acl')) return on(objectAcl);
      if (q.has('retention') || q.has('legal-hold')) return on(buckets.objectLockOfObject);
      if (q.has('tagging')) return on(notImplemented);
      if (headers['x-amz-copy-source'] !== undefined) return on(objects.copyObjectHandler);
      return on(objects.putObjectHandler);
    case 'POST':
      if (q.has('uploads')) return on(multipart.createMultipartHandler);
      if (q.has('uploadId')) return on(multipart.completeMultipartHandler);
      return on(notImplemented);
    case 'DELETE':
      if (q.has('uploadId')) return on(multipart.abortMultipartHandler);
      return on(objects.deleteObjectHandler);
  }
  return undefined;
}

const unsetConfiguration = (code: S3ErrorCode) => async (ctx: S3Context, bucket: string) => {
  const { ownBucket } = await import('../../core/s3/buckets.js');
  await ownBucket(ctx.deps, ctx.caller, bucket);
  throw new S3Error(code, 'The configuration does not exist');
};

async function notImplemented(): Promise<void> {
  throw new S3Error('NotImplemented', 'A header or query you provided implies functionality that is not implemented');
}

async function objectAcl(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const { getObject } = await import('../../core/s3/objects.js');
  await getObject(ctx.deps, ctx.caller, bucket, key);
  await buckets.putAcl(ctx, bucket);
}

export function createS3Handler(deps: S3Deps): (req: IncomingMessage, res: ServerResponse) => void {
  const { config, db, logger } = deps;

  // Secrets unsealed, by sealed form: a decipher per request was 2% of a small GET's CPU. The
  // process holds the master key anyway; the bound is not an eviction policy.
  const unsealed = new Map<string, string>();

  /** The secret of an access key id (an API key's prefix), if the key can sign now. */
  async function secretOf(accessKeyId: string): Promise<string | null> {
    if (accessKeyId.length !== API_KEY_PREFIX_LENGTH) return null;
    const key = await db.apiKeys.get(accessKeyId);
    if (!key || (key.expiresAt != null && key.expiresAt <= Date.now())) return null;
    let secret = unsealed.get(key.sealedSecret);
    if (secret === undefined) {
      if (unsealed.size >= 10_000) unsealed.clear();
      secret = unseal(config.masterKey, key.sealedSecret);
      unsealed.set(key.sealedSecret, secret);
    }
    return secret;
  }

  async function callerOf(accessKeyId: string): Promise<Caller> {
    const key = await db.apiKeys.get(accessKeyId);
    const user = key && (await db.users.get(key.userId));
    if (!key || !user) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
    db.apiKeys.recordUse(key._id, Date.now());
    return { user, key, plan: config.plans.get(user.plan) };
  }

  /** The bucket's CORS configuration (its folder's), for a request from a browser. */
  async function corsOf(bucket: string | null): Promise<CorsConfiguration | null> {
    if (!bucket) return null;
    const record = await db.buckets.get(bucket);
    const cors = record && (await db.cors.get(record.folderId));
    return cors ? { CORSRules: cors.CORSRules } : null;
  }

  async function preflight(req: IncomingMessage, res: ServerResponse, bucket: string | null): Promise<void> {
    const origin = req.headers.origin;
    const method = req.headers['access-control-request-method'];
    const request = {
      origin: origin ?? '',
      method: String(method ?? ''),
      requestHeaders: requestedHeaders(req.headers['access-control-request-headers']),
    };
    const configuration = await corsOf(bucket);
    const rule = configuration && origin && method ? matchCorsRule(configuration, request) : null;
    if (!rule)
      throw new S3Error(
        'AccessDenied',
        "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
      );
    res.writeHead(200, { ...corsResponseHeaders(rule, request), 'content-length': 0 });
    res.end();
  }

  async function handle(req: IncomingMessage, res: ServerResponse, requestId: string, edge: boolean): Promise<void> {
    const { bucket, key } = addressOf(req, config.s3.domain);
    const method = req.method ?? 'GET';
    if (method === 'OPTIONS') return preflight(req, res, bucket);
    const origin = req.headers.origin;
    if (origin) {
      const configuration = await corsOf(bucket);
      const rule = configuration && matchCorsRule(configuration, { origin, method });
      if (rule) for (const [name, value] of Object.entries(corsResponseHeaders(rule, { origin }))) res.setHeader(name, value);
    }
    const url = new URL(req.url ?? '/', 'http://s3');
    const query = url.searchParams;
    const target = route(method, query, bucket, key, req.headers);
    if (!target) throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.');
    const auth = await authenticate(req, url, secretOf);
    const caller = await callerOf(auth.accessKeyId);
    const rate = await countRequest(deps, caller);
    if (rate.exceeded) throw new S3Error('SlowDown', 'Please reduce your request rate.', {}, { 'retry-after': String(rate.resetS) });
    // Accepted: the client may send the body now (server.ts leaves 100-continue to this point).
    if (expectsContinue(req)) {
      res.writeContinue();
      continued.add(res);
    }
    const ctx: S3Context = { deps, req, res, query, bucket, key, requestId, caller, auth, edge };
    if ('service' in target) return target.service!(ctx);
    if ('bucket' in target) return target.bucket!(ctx, bucket!);
    return target.object!(ctx, bucket!, key!);
  }

  function answerError(req: IncomingMessage, res: ServerResponse, requestId: string, err: unknown): void {
    let s3 = toS3Error(err);
    if (!s3) {
      logger.error({ err, method: req.method, path: (req.url ?? '').split('?')[0], requestId }, 'S3 request failed');
      s3 = new S3Error('InternalError', 'We encountered an internal error. Please try again.');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const resource = (req.url ?? '/').split('?')[0]!;
    const body = errorXml(s3, resource, requestId);
    // A body the client is still sending is read and dropped, up to REFUSED_BODY_DRAIN_BYTES, and
    // the connection kept: a proxy in front (the edge) writes the whole body before it reads the
    // answer, and a connection closed under it made the answer its 503, not this error.
    // A client waiting for 100 Continue has not sent its body and never will: nothing to drain,
    // and the connection closes, as what it holds next would be read as a request.
    const waiting = expectsContinue(req) && !continued.has(res);
    const drained = !req.complete && !waiting && drainRefusedBody(req);
    const close: Record<string, string> = req.complete || drained ? {} : { connection: 'close' };
    res.writeHead(s3.status, { ...s3.headers, ...close, 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  // Request ids as S3's look (16 hex digits): unique by a random start per process and a count,
  // not a call into the RNG per request (2% of a small GET's CPU).
  const idBase = crypto.randomBytes(3).toString('hex').toUpperCase();
  let idCount = 0;

  return (req, res) => {
    const requestId = idBase + (idCount++).toString(16).toUpperCase().padStart(10, '0');
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('x-amz-id-2', requestId);
    res.setHeader('server', 'Stupa');
    const edge = takeEdgeDecision(req, config.edge.secret);
    handle(req, res, requestId, edge).catch((err: unknown) => answerError(req, res, requestId, err));
  };
}

const expectsContinue = (req: IncomingMessage) => String(req.headers.expect ?? '').toLowerCase() === '100-continue';
/** Answers whose client was told 100 Continue (and so sends the body). */
const continued = new WeakSet<ServerResponse>();

/** Reads and drops the rest of a refused request's body; past REFUSED_BODY_DRAIN_BYTES the
 * connection is cut. False when the body was already being cut off (the connection closes). */
function drainRefusedBody(req: IncomingMessage): boolean {
  if (req.destroyed) return false;
  req.unpipe();
  req.removeAllListeners('data');
  let bytes = 0;
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > REFUSED_BODY_DRAIN_BYTES) req.socket.destroy();
  });
  req.on('error', () => undefined);
  req.resume();
  return true;
}
