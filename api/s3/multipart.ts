// Multipart uploads: Create, UploadPart, Complete (a durable workflow assembles the object:
// api/usecases/s3/multipart.ts), Abort, ListParts.
import { S3_MAX_KEYS } from '../../infra/constants.js';
import { abortMultipart, completeUpload, createUpload, listParts, uploadPart, type ListedPart } from '../usecases/s3/multipart.js';
import { readSmallBody } from './body.js';
import { assertPrivateAcl } from './buckets.js';
import { checksumHeaders, isoDate, objectDetailsOf, quoted, sendEmpty, sendXml, type S3Context } from './context.js';
import { S3Error } from './errors.js';
import { objectBody } from './objects.js';
import { parseXml } from './xml.js';

const CHECKSUMS = ['CRC32', 'CRC32C', 'SHA1', 'SHA256'];

export async function createMultipartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  assertPrivateAcl(ctx);
  const algorithm = ctx.req.headers['x-amz-checksum-algorithm'];
  const checksumAlgorithm = typeof algorithm === 'string' ? algorithm.toUpperCase() : null;
  if (checksumAlgorithm !== null && !CHECKSUMS.includes(checksumAlgorithm)) {
    throw new S3Error(
      'InvalidRequest',
      `checksum algorithm ${checksumAlgorithm} is not supported here; use one of ${CHECKSUMS.join(', ')}`,
    );
  }
  const type = ctx.req.headers['x-amz-checksum-type'];
  const checksumType = typeof type === 'string' ? type.toUpperCase() : 'COMPOSITE';
  await readSmallBody(ctx.req, ctx.auth, 0);
  const upload = await createUpload(ctx.deps, ctx.caller, bucket, key, { ...objectDetailsOf(ctx.req), checksumAlgorithm });
  const headers: Record<string, string> = checksumAlgorithm
    ? { 'x-amz-checksum-algorithm': checksumAlgorithm, 'x-amz-checksum-type': checksumType }
    : {};
  sendXml(ctx, 200, 'InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: upload._id }, headers);
}

const target = (ctx: S3Context, bucket: string, key: string) => ({ bucket, key, uploadId: ctx.query.get('uploadId') ?? '' });

export async function uploadPartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  if (ctx.req.headers['x-amz-copy-source'] !== undefined)
    throw new S3Error('NotImplemented', 'UploadPartCopy is not implemented; upload the part’s bytes');
  const partNumber = Number(ctx.query.get('partNumber'));
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) {
    throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive');
  }
  const part = await uploadPart(ctx.deps, ctx.caller, { ...target(ctx, bucket, key), partNumber }, objectBody(ctx));
  sendEmpty(ctx, 200, { etag: quoted(part.etag), ...checksumHeaders(part.checksums) });
}

type CompleteRequest = { CompleteMultipartUpload?: { Part?: { PartNumber?: unknown; ETag?: unknown }[] } };

export async function completeMultipartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const body = await readSmallBody(ctx.req, ctx.auth, 4 * 1024 * 1024);
  const doc = parseXml(body.toString('utf8'), ['CompleteMultipartUpload.Part']) as CompleteRequest;
  const parts = doc.CompleteMultipartUpload?.Part;
  if (!doc.CompleteMultipartUpload || !parts || parts.length === 0) {
    throw new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
  }
  const listed: ListedPart[] = parts.map((p) => {
    const partNumber = Number(p.PartNumber);
    if (!Number.isInteger(partNumber) || p.ETag === undefined)
      throw new S3Error('MalformedXML', 'every Part needs a PartNumber and an ETag');
    return { partNumber, etag: String(p.ETag) };
  });
  const result = await completeUpload(ctx.deps, ctx.caller, target(ctx, bucket, key), listed);
  const checksums = Object.fromEntries(Object.entries(result.checksums).map(([name, value]) => [`Checksum${name.toUpperCase()}`, value]));
  sendXml(
    ctx,
    200,
    'CompleteMultipartUploadResult',
    {
      Location: `/${bucket}/${encodeURIComponent(key).replace(/%2F/g, '/')}`,
      Bucket: bucket,
      Key: key,
      ETag: quoted(result.etag),
      ...checksums,
    },
    { 'x-amz-meta-cid': result.cid },
  );
}

export async function abortMultipartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  await abortMultipart(ctx.deps, ctx.caller, target(ctx, bucket, key));
  sendEmpty(ctx, 204);
}

export async function listPartsHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const markerText = ctx.query.get('part-number-marker') ?? '0';
  const maxText = ctx.query.get('max-parts') ?? String(S3_MAX_KEYS);
  const marker = Number(markerText);
  const max = Math.min(Number(maxText), S3_MAX_KEYS);
  if (!Number.isInteger(marker) || marker < 0 || !Number.isInteger(max) || max < 0)
    throw new S3Error('InvalidArgument', 'part-number-marker and max-parts are whole numbers');
  const { upload, parts, truncated } = await listParts(ctx.deps, ctx.caller, target(ctx, bucket, key), marker, max);
  const owner = { ID: ctx.caller.user._id, DisplayName: ctx.caller.user.email };
  sendXml(ctx, 200, 'ListPartsResult', {
    Bucket: bucket,
    Key: key,
    UploadId: upload._id,
    Initiator: owner,
    Owner: owner,
    StorageClass: 'STANDARD',
    PartNumberMarker: marker,
    ...(truncated && parts.length ? { NextPartNumberMarker: parts.at(-1)!.partNumber } : {}),
    MaxParts: max,
    IsTruncated: truncated,
    ...(upload.checksumAlgorithm ? { ChecksumAlgorithm: upload.checksumAlgorithm } : {}),
    Part: parts.map((p) => ({
      PartNumber: p.partNumber,
      LastModified: isoDate(p.createdAt),
      ETag: quoted(p.etag),
      Size: p.size,
      ...Object.fromEntries(Object.entries(p.checksums ?? {}).map(([name, value]) => [`Checksum${name.toUpperCase()}`, value])),
    })),
  });
}
