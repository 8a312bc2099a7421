// Object operations: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects, CopyObject.
// Bytes go in through the upload use-case (verified on the way: api/s3/body.ts) and come out of
// Kubo's own gateway (infra/ipfs/kubo-gateway.ts), which serves ranges of UnixFS files.
import { pipeline } from 'node:stream/promises';
import { checksumTypeOf } from '../../infra/checksums.js';
import pLimit from 'p-limit';
import { ANSWER_MAX_BYTES, S3_DELETE_CONCURRENCY } from '../../infra/constants.js';
import { copyObject, deleteObject, etagListed, getObject, putObject, type ObjectRecord } from '../../core/s3/objects.js';
import { decodeBody, readSmallBody } from './body.js';
import { assertPrivateAcl } from './buckets.js';
import {
  checksumHeaders,
  cidHeaders,
  isoDate,
  objectDetailsOf,
  objectHeaders,
  quoted,
  sendEmpty,
  sendXml,
  type S3Context,
} from './context.js';
import { checkWriteConditions, etagList, preconditionFailed, sizeCondition, timeCondition } from './conditions.js';
import { edgeObjectHeaders } from './edge.js';
import { S3Error } from './errors.js';
import { toS3Error } from './failures.js';
import { parseXml } from './xml.js';

/** S3's PutObject takes at most 5 GiB; a body is read past that only to refuse it. */
const MAX_BODY = 5 * 1024 ** 3;

/** The body's length as the client declared it: the decoded length of an aws-chunked body, else Content-Length. */
export function declaredLength(ctx: S3Context): number | undefined {
  const decoded = ctx.req.headers['x-amz-decoded-content-length'] ?? ctx.req.headers['content-length'];
  if (decoded === undefined) {
    if (ctx.req.headers['transfer-encoding'] === undefined)
      throw new S3Error('MissingContentLength', 'You must provide the Content-Length HTTP header.');
    return undefined;
  }
  const n = Number(decoded);
  if (!Number.isSafeInteger(n) || n < 0) throw new S3Error('InvalidArgument', 'the content length is not a number');
  return n;
}

/** The request's body as the use-cases take it, verified as it streams. */
export function objectBody(ctx: S3Context) {
  const declaredBytes = declaredLength(ctx);
  const { stream, result } = decodeBody(ctx.req, ctx.auth, { maxBytes: MAX_BODY });
  const abort = new AbortController();
  ctx.req.on('close', () => {
    if (!ctx.req.complete) abort.abort();
  });
  return { stream, result, declaredBytes, signal: abort.signal };
}

export async function putObjectHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  assertPrivateAcl(ctx);
  const condition = await checkWriteConditions(ctx, bucket, key, 'write');
  const object = await putObject(ctx.deps, ctx.caller, bucket, key, objectBody(ctx), objectDetailsOf(ctx.req), condition);
  sendEmpty(ctx, 200, { etag: quoted(object.etag), ...cidHeaders(ctx, object.cid), ...checksumHeaders(object.checksums) });
}

/** A byte range asked for: undefined for the whole object (absent or not a single range, which S3 ignores). */
function requestedRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  const m = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw unsatisfiable(size);
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined;
  }
  if (start >= size) throw unsatisfiable(size);
  return { start, end };
}

const unsatisfiable = (size: number) =>
  new S3Error(
    'InvalidRange',
    'The requested range is not satisfiable',
    { ActualObjectSize: String(size) },
    { 'content-range': `bytes */${size}` },
  );

/**
 * If-Match, If-Unmodified-Since (failed), If-None-Match, If-Modified-Since (not modified), in
 * RFC 7232's order, from the headers named `<prefix>if-match` and so on: a GET's own (failed is
 * 412, not modified 304) or CopyObject's `x-amz-copy-source-` ones about its source (both 412).
 */
function preconditions(ctx: S3Context, object: ObjectRecord, prefix = ''): 'ok' | 'not-modified' {
  const h = (name: string) => {
    const value = ctx.req.headers[`${prefix}${name}`];
    return Array.isArray(value) ? value.join(',') : value;
  };
  const matches = (list: string) => etagListed(etagList(list), object.etag);
  const seconds = Math.floor(object.lastModified / 1000) * 1000;
  const failed = (condition: string) => preconditionFailed(`${prefix}${condition}`);
  const ifMatch = h('if-match');
  const ifUnmodifiedSince = h('if-unmodified-since');
  if (ifMatch !== undefined) {
    if (!matches(ifMatch)) throw failed('If-Match');
  } else if (ifUnmodifiedSince !== undefined) {
    const since = Date.parse(ifUnmodifiedSince);
    if (!Number.isNaN(since) && seconds > since) throw failed('If-Unmodified-Since');
  }
  const ifNoneMatch = h('if-none-match');
  const ifModifiedSince = h('if-modified-since');
  if (ifNoneMatch !== undefined) {
    if (matches(ifNoneMatch)) return 'not-modified';
  } else if (ifModifiedSince !== undefined) {
    const since = Date.parse(ifModifiedSince);
    if (!Number.isNaN(since) && seconds <= since) return 'not-modified';
  }
  return 'ok';
}

/**
 * GET or HEAD `?partNumber=N`: the bytes of part N of a multipart object, with the object's
 * ETag and its parts count, as a range (206); part 1 of an object that was not uploaded in
 * parts is the whole object (200, no range). A part past the last is 400 InvalidPart, as
 * the conformance suites expect; a Range beside it is 400 InvalidRequest.
 */
function partRange(ctx: S3Context, object: ObjectRecord): { n: number; range?: { start: number; end: number }; empty?: true } | undefined {
  const text = ctx.query.get('partNumber');
  if (text === null) return undefined;
  const n = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 10_000)) throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive');
  if (ctx.req.headers.range !== undefined) {
    throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter');
  }
  const count = object.parts ?? 1;
  if (n > count) throw new S3Error('InvalidPart', 'The requested partnumber is not satisfiable');
  if (object.parts === null) return { n };
  const sizes = object.partSizes ?? (count === 1 ? [object.size] : null);
  if (!sizes) {
    throw new S3Error('InvalidRequest', 'this object was completed before part sizes were recorded; read it by byte range instead');
  }
  const start = sizes.slice(0, n - 1).reduce((sum, size) => sum + size, 0);
  const size = sizes[n - 1]!;
  // An empty part (only the last may be) is an empty answer: no range to name.
  return size === 0 ? { n, empty: true } : { n, range: { start, end: start + size - 1 } };
}

/** `response-*` query parameters (presigned GETs) override the stored headers. */
const OVERRIDES = ['content-type', 'content-language', 'expires', 'cache-control', 'content-disposition', 'content-encoding'];

export async function getObjectHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const object = await getObject(ctx.deps, ctx.caller, bucket, key);
  const withChecksums = String(ctx.req.headers['x-amz-checksum-mode'] ?? '').toUpperCase() === 'ENABLED';
  const headers = objectHeaders(ctx, object, withChecksums);
  for (const name of OVERRIDES) {
    const value = ctx.query.get(`response-${name}`);
    if (value !== null) headers[name] = value;
  }
  if (preconditions(ctx, object) === 'not-modified') {
    const { etag, 'last-modified': lastModified } = headers;
    ctx.res.writeHead(304, { etag: etag!, 'last-modified': lastModified! });
    ctx.res.end();
    return;
  }
  const part = partRange(ctx, object);
  const range = part ? part.range : requestedRange(ctx.req.headers.range, object.size);
  if (range) {
    // A range's checksum is not the object's.
    for (const name of Object.keys(headers)) if (name.startsWith('x-amz-checksum-')) delete headers[name];
    headers['content-range'] = `bytes ${range.start}-${range.end}/${object.size}`;
  }
  // A part's own checksum, when kept: S3 answers it, with the object's checksum type, for ?partNumber=N.
  const partChecksum = part && object.partChecksums?.[part.n - 1];
  if (withChecksums && partChecksum) {
    const [name, value] = Object.entries(object.checksums).find(([, v]) => v)!;
    headers[`x-amz-checksum-${name}`] = partChecksum;
    headers['x-amz-checksum-type'] = checksumTypeOf(value!);
  }
  const length = range ? range.end - range.start + 1 : part?.empty ? 0 : object.size;
  const status = range ? 206 : 200;
  if (ctx.req.method === 'HEAD' || length === 0) {
    ctx.res.writeHead(status, { ...headers, 'content-length': length });
    ctx.res.end();
    return;
  }
  // A whole small object's bytes may be in memory: they are its CID's, which never change.
  const memoryKey = range || ctx.req.method !== 'GET' ? null : `/ipfs/${object.cid}`;
  const kept = memoryKey ? ctx.deps.answers.get(memoryKey) : undefined;
  // Behind the edge, only a small whole object is answered here (and kept); the edge reads
  // every other answer's bytes from Kubo itself (api/s3/edge.ts).
  if (ctx.edge && !kept && !(memoryKey && object.size <= ANSWER_MAX_BYTES)) {
    sendEmpty(ctx, status, edgeObjectHeaders(headers, object.cid, range));
    return;
  }
  if (kept) {
    ctx.res.writeHead(status, { ...headers, 'content-length': length });
    ctx.res.end(kept.body);
    return;
  }
  const abort = new AbortController();
  ctx.res.on('close', () => abort.abort());
  let upstream;
  try {
    upstream = await ctx.deps.kuboGateway.request(
      'GET',
      `/ipfs/${object.cid}`,
      range ? { range: `bytes=${range.start}-${range.end}` } : {},
      abort.signal,
    );
  } catch {
    throw new S3Error('ServiceUnavailable', 'the content store is not reachable; retry later');
  }
  if (upstream.statusCode !== 200 && upstream.statusCode !== 206) {
    upstream.resume();
    throw new S3Error('ServiceUnavailable', `the content store answered ${upstream.statusCode}; retry later`);
  }
  ctx.res.writeHead(status, { ...headers, 'content-length': length });
  const keep =
    memoryKey && upstream.statusCode === 200
      ? ctx.deps.answers.collector(memoryKey, { ...upstream.headers } as Record<string, string>)
      : null;
  if (keep) {
    upstream.on('data', (chunk: Buffer) => keep.add(chunk));
    upstream.once('end', () => keep.done());
  }
  await pipeline(upstream, ctx.res).catch(() => undefined);
}

export async function deleteObjectHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const condition = await checkWriteConditions(ctx, bucket, key, 'delete');
  await deleteObject(ctx.deps, ctx.caller, bucket, key, condition);
  sendEmpty(ctx, 204);
}

type DeleteRequest = {
  Delete?: { Quiet?: string | boolean; Object?: { Key?: unknown; ETag?: unknown; Size?: unknown; LastModifiedTime?: unknown }[] };
};

/** DeleteObjects: up to 1,000 keys, each deleted on its own (S3_DELETE_CONCURRENCY at once);
 * errors are listed in the request's order, not thrown, but for the bucket's own. */
export async function deleteObjectsHandler(ctx: S3Context, bucket: string): Promise<void> {
  const body = await readSmallBody(ctx.req, ctx.auth, 2 * 1024 * 1024);
  const doc = parseXml(body.toString('utf8'), ['Delete.Object']) as DeleteRequest;
  const objects = doc.Delete?.Object;
  if (!doc.Delete || !objects || objects.length === 0 || objects.length > 1000) {
    throw new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
  }
  const quiet = String(doc.Delete.Quiet) === 'true';
  const limit = pLimit(S3_DELETE_CONCURRENCY);
  const outcomes = await Promise.all(
    objects.map((entry) =>
      limit(async () => {
        const key = entry.Key === undefined ? '' : String(entry.Key);
        try {
          // An entry's ETag is its If-Match, its Size and LastModifiedTime what the object must
          // have: another object is not deleted; no object, nothing to do.
          await deleteObject(ctx.deps, ctx.caller, bucket, key, {
            ...(entry.ETag !== undefined ? { ifMatch: etagList(String(entry.ETag)) } : {}),
            ...(entry.Size !== undefined ? { size: sizeCondition(entry.Size) } : {}),
            ...(entry.LastModifiedTime !== undefined ? { modifiedAt: timeCondition(entry.LastModifiedTime) } : {}),
          });
          return { key };
        } catch (err) {
          const s3 = toS3Error(err);
          // The bucket's own failures (and unexpected ones) are the request's, once all have run.
          if (!s3 || s3.code === 'NoSuchBucket' || s3.code === 'AccessDenied') return { key, fatal: err };
          return { key, error: { Key: key, Code: s3.code, Message: s3.message } };
        }
      }),
    ),
  );
  const fatal = outcomes.find((o) => 'fatal' in o);
  if (fatal) throw fatal.fatal;
  const deleted = outcomes.filter((o) => !('error' in o)).map((o) => ({ Key: o.key }));
  const errors = outcomes.flatMap((o) => ('error' in o && o.error ? [o.error] : []));
  sendXml(ctx, 200, 'DeleteResult', { ...(quiet ? {} : { Deleted: deleted }), Error: errors });
}

/** `x-amz-copy-source`: `[/]<bucket>/<key>[?versionId=…]`, URL-encoded. */
export function copySource(header: string): { bucket: string; key: string } {
  const [path, query] = header.split('?');
  const version = new URLSearchParams(query ?? '').get('versionId');
  if (version !== null && version !== 'null') throw new S3Error('NoSuchVersion', 'The specified version does not exist.');
  let text: string;
  try {
    text = decodeURIComponent(path!.replace(/^\//, ''));
  } catch {
    throw new S3Error('InvalidArgument', 'x-amz-copy-source is not properly URL-encoded');
  }
  const slash = text.indexOf('/');
  if (slash <= 0 || slash === text.length - 1) throw new S3Error('InvalidArgument', 'x-amz-copy-source must be <bucket>/<key>');
  return { bucket: text.slice(0, slash), key: text.slice(slash + 1) };
}

/** The request's conditions on a copy's source: a source that changed (or did not) as they say is refused (412). */
export function copySourceCheck(ctx: S3Context): (source: ObjectRecord) => void {
  return (source) => {
    if (preconditions(ctx, source, 'x-amz-copy-source-') === 'not-modified') {
      throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
        Condition: 'x-amz-copy-source-If-None-Match',
      });
    }
  };
}

export async function copyObjectHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  assertPrivateAcl(ctx);
  const from = copySource(String(ctx.req.headers['x-amz-copy-source']));
  const replace = String(ctx.req.headers['x-amz-metadata-directive'] ?? 'COPY').toUpperCase() === 'REPLACE';
  if (!replace && from.bucket === bucket && from.key === key) {
    throw new S3Error(
      'InvalidRequest',
      "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
    );
  }
  await readSmallBody(ctx.req, ctx.auth, 0);
  const condition = await checkWriteConditions(ctx, bucket, key, 'write');
  const object = await copyObject(
    ctx.deps,
    ctx.caller,
    from,
    { bucket, key },
    replace ? objectDetailsOf(ctx.req) : undefined,
    copySourceCheck(ctx),
    condition,
  );
  sendXml(
    ctx,
    200,
    'CopyObjectResult',
    { LastModified: isoDate(object.lastModified), ETag: quoted(object.etag) },
    cidHeaders(ctx, object.cid),
  );
}
