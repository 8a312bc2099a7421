// ListObjectsV2, ListObjects (v1, which rclone and s3cmd use), ListObjectVersions (an
// unversioned bucket's listing, for cleanup code that asks) and ListMultipartUploads.
import { S3_MAX_KEYS } from '../../infra/constants.js';
import { listObjects, type Listing } from '../../core/s3/listing.js';
import { listUploads } from '../../core/s3/multipart.js';
import { isoDate, owner, quoted, sendXml, type S3Context } from './context.js';
import { S3Error } from './errors.js';

/** `encoding-type=url`: names go out URL-encoded (keys may hold characters XML cannot carry). */
function encoder(ctx: S3Context): (text: string) => string {
  const type = ctx.query.get('encoding-type');
  if (type === null) return (t) => t;
  if (type !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request');
  return (t) => encodeURIComponent(t).replace(/%2F/g, '/');
}

/** Characters XML 1.0 can carry in text. */
const XML_TEXT = /^[\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u;

function maxKeys(ctx: S3Context, name = 'max-keys'): number {
  const text = ctx.query.get(name);
  if (text === null) return S3_MAX_KEYS;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
    throw new S3Error('InvalidArgument', `Provided ${name} not an integer or within integer range`);
  return Math.min(n, S3_MAX_KEYS);
}

function contents(ctx: S3Context, listing: Listing, withOwner: boolean, encode: (t: string) => string) {
  return listing.objects.map((o) => ({
    Key: encode(o.key),
    LastModified: isoDate(o.lastModified),
    ETag: quoted(o.etag),
    Size: o.size,
    StorageClass: 'STANDARD',
    ...(withOwner ? { Owner: owner(ctx) } : {}),
  }));
}

const prefixes = (listing: Listing, encode: (t: string) => string) => listing.commonPrefixes.map((p) => ({ Prefix: encode(p) }));

export async function listObjectsV2(ctx: S3Context, bucket: string): Promise<void> {
  const encode = encoder(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const delimiter = ctx.query.get('delimiter') ?? '';
  const token = ctx.query.get('continuation-token');
  const startAfter = ctx.query.get('start-after') ?? '';
  let after = startAfter;
  // An empty token is no token (S3 lists from the start and echoes it).
  if (token) {
    after = Buffer.from(token, 'base64url').toString('utf8');
    if (Buffer.from(after).toString('base64url') !== token)
      throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect');
  }
  const max = maxKeys(ctx);
  const listing = await listObjects(ctx.deps, ctx.caller, bucket, { prefix, delimiter, after, maxKeys: max });
  sendXml(ctx, 200, 'ListBucketResult', {
    Name: bucket,
    Prefix: encode(prefix),
    ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
    MaxKeys: max,
    ...(ctx.query.has('encoding-type') ? { EncodingType: 'url' } : {}),
    KeyCount: listing.objects.length + listing.commonPrefixes.length,
    IsTruncated: listing.truncated,
    ...(token !== null ? { ContinuationToken: token } : {}),
    ...(listing.truncated && listing.last !== null ? { NextContinuationToken: Buffer.from(listing.last).toString('base64url') } : {}),
    ...(startAfter ? { StartAfter: encode(startAfter) } : {}),
    Contents: contents(ctx, listing, ctx.query.get('fetch-owner') === 'true', encode),
    CommonPrefixes: prefixes(listing, encode),
  });
}

export async function listObjectsV1(ctx: S3Context, bucket: string): Promise<void> {
  const encode = encoder(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const delimiter = ctx.query.get('delimiter') ?? '';
  const marker = ctx.query.get('marker') ?? '';
  const max = maxKeys(ctx);
  const listing = await listObjects(ctx.deps, ctx.caller, bucket, { prefix, delimiter, after: marker, maxKeys: max });
  sendXml(ctx, 200, 'ListBucketResult', {
    Name: bucket,
    // S3 gives ListObjects' (v1) prefix back as it was sent, also with encoding-type=url, and
    // botocore decodes every other name of the answer but not this one (a newline came back as
    // %0A); one XML cannot carry is still encoded.
    Prefix: XML_TEXT.test(prefix) ? prefix : encode(prefix),
    Marker: encode(marker),
    MaxKeys: max,
    ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
    ...(ctx.query.has('encoding-type') ? { EncodingType: 'url' } : {}),
    IsTruncated: listing.truncated,
    // Always given when truncated (S3 gives it only with a delimiter; clients then take the last key, the same).
    ...(listing.truncated && listing.last !== null ? { NextMarker: encode(listing.last) } : {}),
    Contents: contents(ctx, listing, true, encode),
    CommonPrefixes: prefixes(listing, encode),
  });
}

/** An unversioned bucket's versions: every object once, `VersionId` null, the latest. */
export async function listObjectVersions(ctx: S3Context, bucket: string): Promise<void> {
  const encode = encoder(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const delimiter = ctx.query.get('delimiter') ?? '';
  const keyMarker = ctx.query.get('key-marker') ?? '';
  const max = maxKeys(ctx);
  const listing = await listObjects(ctx.deps, ctx.caller, bucket, { prefix, delimiter, after: keyMarker, maxKeys: max });
  sendXml(ctx, 200, 'ListVersionsResult', {
    Name: bucket,
    Prefix: encode(prefix),
    KeyMarker: encode(keyMarker),
    VersionIdMarker: ctx.query.get('version-id-marker') ?? '',
    MaxKeys: max,
    ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
    ...(ctx.query.has('encoding-type') ? { EncodingType: 'url' } : {}),
    IsTruncated: listing.truncated,
    ...(listing.truncated && listing.last !== null ? { NextKeyMarker: encode(listing.last), NextVersionIdMarker: 'null' } : {}),
    Version: listing.objects.map((o) => ({
      Key: encode(o.key),
      VersionId: 'null',
      IsLatest: true,
      LastModified: isoDate(o.lastModified),
      ETag: quoted(o.etag),
      Size: o.size,
      StorageClass: 'STANDARD',
      Owner: owner(ctx),
    })),
    CommonPrefixes: prefixes(listing, encode),
  });
}

export async function listMultipartUploads(ctx: S3Context, bucket: string): Promise<void> {
  const encode = encoder(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const keyMarker = ctx.query.get('key-marker') ?? '';
  const idMarker = ctx.query.get('upload-id-marker') ?? '';
  const max = maxKeys(ctx, 'max-uploads');
  const { uploads, truncated } = await listUploads(ctx.deps, ctx.caller, bucket, {
    prefix,
    afterKey: keyMarker || undefined,
    afterId: keyMarker && idMarker ? idMarker : undefined,
    maxUploads: max,
  });
  const last = uploads.at(-1);
  sendXml(ctx, 200, 'ListMultipartUploadsResult', {
    Bucket: bucket,
    KeyMarker: encode(keyMarker),
    UploadIdMarker: idMarker,
    ...(truncated && last ? { NextKeyMarker: encode(last.key), NextUploadIdMarker: last._id } : {}),
    Prefix: encode(prefix),
    MaxUploads: max,
    IsTruncated: truncated,
    Upload: uploads.map((u) => ({
      Key: encode(u.key),
      UploadId: u._id,
      Initiator: owner(ctx),
      Owner: owner(ctx),
      StorageClass: 'STANDARD',
      Initiated: isoDate(u.createdAt),
      ...(u.checksumAlgorithm ? { ChecksumAlgorithm: u.checksumAlgorithm, ChecksumType: u.checksumType ?? 'COMPOSITE' } : {}),
    })),
  });
}
