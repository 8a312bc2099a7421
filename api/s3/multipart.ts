// Multipart uploads: Create, UploadPart, Complete (a durable workflow assembles the object:
// core/s3/multipart.ts), Abort, ListParts.
import {
  CHECKSUM_LABELS,
  CHECKSUM_NAMES,
  checksumTypeOf,
  isChecksumName,
  isCrc,
  type ChecksumName,
  type ChecksumType,
} from '../../infra/checksums.js';
import { S3_MAX_KEYS } from '../../infra/constants.js';
import type { ObjectChecksums } from '../../infra/db/objects.js';
import { abortMultipart, completeUpload, createUpload, listParts, uploadPart, type ListedPart } from '../../core/s3/multipart.js';
import { readSmallBody } from './body.js';
import { assertPrivateAcl } from './buckets.js';
import { checksumHeaders, cidHeaders, isoDate, objectDetailsOf, quoted, sendEmpty, sendXml, type S3Context } from './context.js';
import { S3Error } from './errors.js';
import { checkWriteConditions } from './conditions.js';
import { copySource, copySourceCheck, objectBody } from './objects.js';
import { parseXml } from './xml.js';
import { copyPart } from '../../core/s3/part-copy.js';

const header = (ctx: S3Context, name: string) => {
  const value = ctx.req.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/** CreateMultipartUpload's x-amz-checksum-algorithm and x-amz-checksum-type, as S3 allows them:
 * CRC64NVME is FULL_OBJECT only, SHA1 and SHA256 COMPOSITE only, CRC32 and CRC32C either
 * (COMPOSITE unless asked). */
function checksumChoice(ctx: S3Context): { checksumAlgorithm: ChecksumName | null; checksumType: ChecksumType | null } {
  const algorithm = header(ctx, 'x-amz-checksum-algorithm')?.toLowerCase();
  const type = header(ctx, 'x-amz-checksum-type')?.toUpperCase();
  if (algorithm === undefined) {
    if (type !== undefined) {
      throw new S3Error('InvalidRequest', 'The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.');
    }
    return { checksumAlgorithm: null, checksumType: null };
  }
  if (!isChecksumName(algorithm)) {
    const valid = CHECKSUM_NAMES.map((n) => CHECKSUM_LABELS[n]).join(', ');
    throw new S3Error(
      'InvalidRequest',
      `Checksum algorithm provided is unsupported. Please try again with any of the valid types: [${valid}]`,
    );
  }
  const checksumType = type ?? (algorithm === 'crc64nvme' ? 'FULL_OBJECT' : 'COMPOSITE');
  if (checksumType !== 'FULL_OBJECT' && checksumType !== 'COMPOSITE') {
    throw new S3Error('InvalidRequest', 'Value for x-amz-checksum-type header is invalid.');
  }
  if (checksumType === 'COMPOSITE' ? algorithm === 'crc64nvme' : !isCrc(algorithm)) {
    throw new S3Error('InvalidRequest', `The ${checksumType} checksum type cannot be used with the ${algorithm} checksum algorithm.`);
  }
  return { checksumAlgorithm: algorithm, checksumType };
}

export async function createMultipartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  assertPrivateAcl(ctx);
  const checksums = checksumChoice(ctx);
  await readSmallBody(ctx.req, ctx.auth, 0);
  const upload = await createUpload(ctx.deps, ctx.caller, bucket, key, { ...objectDetailsOf(ctx.req), ...checksums });
  const headers: Record<string, string> = upload.checksumAlgorithm
    ? { 'x-amz-checksum-algorithm': upload.checksumAlgorithm, 'x-amz-checksum-type': checksums.checksumType! }
    : {};
  sendXml(ctx, 200, 'InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: upload._id }, headers);
}

const target = (ctx: S3Context, bucket: string, key: string) => ({ bucket, key, uploadId: ctx.query.get('uploadId') ?? '' });

function partNumberOf(ctx: S3Context): number {
  const partNumber = Number(ctx.query.get('partNumber'));
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) {
    throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive');
  }
  return partNumber;
}

export async function uploadPartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  if (ctx.req.headers['x-amz-copy-source'] !== undefined) return uploadPartCopyHandler(ctx, bucket, key);
  const partNumber = partNumberOf(ctx);
  const part = await uploadPart(ctx.deps, ctx.caller, { ...target(ctx, bucket, key), partNumber }, objectBody(ctx));
  sendEmpty(ctx, 200, { etag: quoted(part.etag), ...checksumHeaders(part.checksums) });
}

/** `x-amz-copy-source-range: bytes=<first>-<last>` against the source's size: both ends, in order
 * (else 400 InvalidArgument), within the source (else InvalidRange); absent, the whole source. */
function copyRange(header: string | undefined, size: number): { offset: number; length: number } {
  if (header === undefined) return { offset: 0, length: size };
  const m = /^bytes=(\d+)-(\d+)$/.exec(header.trim());
  if (!m || Number(m[1]) > Number(m[2])) {
    throw new S3Error(
      'InvalidArgument',
      'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
    );
  }
  const [first, last] = [Number(m[1]), Number(m[2])];
  if (last >= size)
    throw new S3Error('InvalidRange', `Range specified is not valid for source object of size: ${size}`, {
      ActualObjectSize: String(size),
    });
  return { offset: first, length: last - first + 1 };
}

/** UploadPartCopy: the part is (a range of) an object of the caller's (core/s3/part-copy.ts). */
async function uploadPartCopyHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const partNumber = partNumberOf(ctx);
  const from = copySource(String(ctx.req.headers['x-amz-copy-source']));
  const range = header(ctx, 'x-amz-copy-source-range');
  await readSmallBody(ctx.req, ctx.auth, 0);
  const { part } = await copyPart(
    ctx.deps,
    ctx.caller,
    { ...target(ctx, bucket, key), partNumber },
    from,
    (size) => copyRange(range, size),
    copySourceCheck(ctx),
  );
  const checksums = Object.fromEntries(
    Object.entries(part.checksums).map(([name, value]) => [`Checksum${CHECKSUM_LABELS[name as ChecksumName]}`, value]),
  );
  sendXml(ctx, 200, 'CopyPartResult', { LastModified: isoDate(part.createdAt), ETag: quoted(part.etag), ...checksums });
}

type CompleteRequest = { CompleteMultipartUpload?: { Part?: Record<string, unknown>[] } };

/** The Checksum<ALGORITHM> elements of a part, or the x-amz-checksum-<algorithm> headers. */
function checksumsOf(get: (name: ChecksumName) => unknown): ObjectChecksums {
  const checksums: ObjectChecksums = {};
  for (const name of CHECKSUM_NAMES) {
    const value = get(name);
    if (value !== undefined && value !== '') checksums[name] = String(value);
  }
  return checksums;
}

export async function completeMultipartHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  // Its x-amz-checksum-* headers are the object's, not the XML's (checked by completeUpload).
  const body = await readSmallBody(ctx.req, ctx.auth, 4 * 1024 * 1024, { checksumHeaders: false });
  const doc = parseXml(body.toString('utf8'), ['CompleteMultipartUpload.Part']) as CompleteRequest;
  const parts = doc.CompleteMultipartUpload?.Part;
  if (!doc.CompleteMultipartUpload || !parts || parts.length === 0) {
    throw new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
  }
  const listed: ListedPart[] = parts.map((p) => {
    const partNumber = Number(p.PartNumber);
    if (!Number.isInteger(partNumber) || p.ETag === undefined)
      throw new S3Error('MalformedXML', 'every Part needs a PartNumber and an ETag');
    return { partNumber, etag: String(p.ETag), checksums: checksumsOf((name) => p[`Checksum${CHECKSUM_LABELS[name]}`]) };
  });
  const expected = {
    type: header(ctx, 'x-amz-checksum-type')?.toUpperCase(),
    checksums: checksumsOf((name) => header(ctx, `x-amz-checksum-${name}`)),
  };
  // A retried completion of a completed upload answers as the first did, whatever the key holds now.
  const upload = await ctx.deps.db.multipart.get(target(ctx, bucket, key).uploadId);
  const condition = upload?.state === 'open' ? await checkWriteConditions(ctx, bucket, key, 'write') : undefined;
  const result = await completeUpload(ctx.deps, ctx.caller, target(ctx, bucket, key), listed, expected, condition);
  const checksums = Object.entries(result.checksums).map(([name, value]) => [`Checksum${CHECKSUM_LABELS[name as ChecksumName]}`, value]);
  if (checksums.length > 0) checksums.push(['ChecksumType', checksumTypeOf(checksums[0]![1]!)]);
  sendXml(
    ctx,
    200,
    'CompleteMultipartUploadResult',
    {
      Location: `/${bucket}/${encodeURIComponent(key).replace(/%2F/g, '/')}`,
      Bucket: bucket,
      Key: key,
      ETag: quoted(result.etag),
      ...Object.fromEntries(checksums),
    },
    cidHeaders(ctx, result.cid),
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
    ...(upload.checksumAlgorithm ? { ChecksumAlgorithm: upload.checksumAlgorithm, ChecksumType: upload.checksumType ?? 'COMPOSITE' } : {}),
    Part: parts.map((p) => ({
      PartNumber: p.partNumber,
      LastModified: isoDate(p.createdAt),
      ETag: quoted(p.etag),
      Size: p.size,
      ...Object.fromEntries(
        Object.entries(p.checksums ?? {}).map(([name, value]) => [`Checksum${CHECKSUM_LABELS[name as ChecksumName]}`, value]),
      ),
    })),
  });
}
