// What an S3 handler is given, and how it answers: XML documents, empty answers, and the
// headers every object answer carries.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { checksumTypeOf } from '../../infra/checksums.js';
import type { KuboGateway } from '../../infra/ipfs/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import type { AnswerMemory } from '../answers.js';
import type { Caller, UseCaseDeps } from '../../core/deps.js';
import type { ObjectRecord } from '../../core/s3/objects.js';
import type { Authenticated } from './auth.js';
import { S3Error } from './errors.js';
import { toXml } from './xml.js';

export interface S3Deps extends UseCaseDeps {
  logger: Logger;
  kuboGateway: KuboGateway;
  /** Small objects' bytes by CID (api/answers.ts). */
  answers: AnswerMemory;
}

export interface S3Context {
  deps: S3Deps;
  req: IncomingMessage;
  res: ServerResponse;
  /** The request's query (subresources like `?uploads` are names with empty values). */
  query: URLSearchParams;
  /** Null for the service itself (ListBuckets). */
  bucket: string | null;
  /** Null for a bucket operation. */
  key: string | null;
  requestId: string;
  caller: Caller;
  auth: Authenticated;
  /** The edge asks (api/s3/edge.ts): GetObject may leave a large object's bytes to it. */
  edge: boolean;
}

export function sendXml(ctx: S3Context, status: number, root: string, body: object, headers: Record<string, string> = {}): void {
  const text = toXml(root, body);
  ctx.res.writeHead(status, { ...headers, 'content-type': 'application/xml', 'content-length': Buffer.byteLength(text) });
  ctx.res.end(ctx.req.method === 'HEAD' ? undefined : text);
}

export function sendEmpty(ctx: S3Context, status: number, headers: Record<string, string | number> = {}): void {
  ctx.res.writeHead(status, { ...headers, 'content-length': 0 });
  ctx.res.end();
}

/** S3's dates in XML: ISO 8601 with milliseconds. In headers: RFC 7231 (toUTCString). */
export const isoDate = (ms: number) => new Date(ms).toISOString();

export const quoted = (etag: string) => `"${etag}"`;

/** The caller as S3 names an owner (buckets, ACLs, listings with fetch-owner). */
export const owner = (ctx: S3Context) => ({ ID: ctx.caller.user._id, DisplayName: ctx.caller.user.email });

/** The headers of an object, as GetObject, HeadObject and PutObject carry them. */
export function objectHeaders(ctx: S3Context, object: ObjectRecord, withChecksums: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    etag: quoted(object.etag),
    'last-modified': new Date(object.lastModified).toUTCString(),
    'content-type': object.contentType,
    'accept-ranges': 'bytes',
  };
  const { cacheControl, contentDisposition, contentEncoding, contentLanguage, expires } = object.headers ?? {};
  if (cacheControl) headers['cache-control'] = cacheControl;
  if (contentDisposition) headers['content-disposition'] = contentDisposition;
  if (contentEncoding) headers['content-encoding'] = contentEncoding;
  if (contentLanguage) headers['content-language'] = contentLanguage;
  if (expires) headers.expires = expires;
  for (const [name, value] of Object.entries(JSON.parse(object.meta) as Record<string, string>)) headers[`x-amz-meta-${name}`] = value;
  // The service's own, after the user's: a user's `x-amz-meta-cid` cannot hide the real one.
  Object.assign(headers, cidHeaders(ctx, object.cid));
  if (object.parts) headers['x-amz-mp-parts-count'] = String(object.parts);
  if (withChecksums) Object.assign(headers, checksumHeaders(object.checksums));
  return headers;
}

/**
 * Where an object's content is on IPFS: `x-ipfs-path` always (the header IPFS gateways answer
 * with, which browser extensions look for), and `x-amz-meta-cid` unless S3_META_CID=false (the
 * service's contract, and Filebase's: S3 tools read the CID as user metadata; without it, user
 * metadata comes back exactly as written).
 */
export function cidHeaders(ctx: S3Context, cid: string): Record<string, string> {
  return { 'x-ipfs-path': `/ipfs/${cid}`, ...(ctx.deps.config.s3.metaCid ? { 'x-amz-meta-cid': cid } : {}) };
}

/** Each checksum's `x-amz-checksum-<name>`, and S3's `x-amz-checksum-type` of the object's. */
export function checksumHeaders(checksums: ObjectRecord['checksums'] | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(checksums ?? {})) {
    if (!value) continue;
    headers[`x-amz-checksum-${name}`] = value;
    headers['x-amz-checksum-type'] = checksumTypeOf(value);
  }
  return headers;
}

/** The user metadata and stored headers of a PutObject, CopyObject (REPLACE) or CreateMultipartUpload. */
export function objectDetailsOf(req: IncomingMessage) {
  const meta: Record<string, string> = {};
  let metaBytes = 0;
  for (const [name, value] of Object.entries(req.headers)) {
    if (!name.startsWith('x-amz-meta-') || value === undefined) continue;
    const text = Array.isArray(value) ? value.join(',') : value;
    meta[name.slice('x-amz-meta-'.length)] = text;
    metaBytes += name.length - 'x-amz-meta-'.length + text.length;
  }
  // S3's limit on user metadata.
  if (metaBytes > 2048) throw new S3Error('MetadataTooLarge', 'user metadata is at most 2 KB');
  const header = (name: string) => {
    const value = req.headers[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const headers = {
    cacheControl: header('cache-control'),
    contentDisposition: header('content-disposition'),
    contentEncoding: stripAwsChunked(header('content-encoding')),
    contentLanguage: header('content-language'),
    expires: header('expires'),
  };
  for (const k of Object.keys(headers) as (keyof typeof headers)[]) if (headers[k] === undefined) delete headers[k];
  return { contentType: header('content-type') ?? 'binary/octet-stream', meta, headers };
}

/** `aws-chunked` is the transfer's framing, not the object's encoding: S3 does not store it. */
function stripAwsChunked(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const kept = value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v && v !== 'aws-chunked');
  return kept.length ? kept.join(', ') : undefined;
}
