// GetObjectAttributes (`GET /<bucket>/<key>?attributes`): what is kept about an object, without
// its bytes, for the attributes named in `x-amz-object-attributes` (ETag, Checksum, ObjectParts,
// StorageClass, ObjectSize). A composite checksum is given without its `-<parts>`, as S3 answers,
// and a multipart object's parts as their count and a page of them (number, size, checksum).
import { CHECKSUM_LABELS, checksumTypeOf, type ChecksumName } from '../../infra/checksums.js';
import { getObject, type ObjectRecord } from '../../core/s3/objects.js';
import { sendXml, type S3Context } from './context.js';
import { S3Error } from './errors.js';

const ATTRIBUTES = new Set(['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize']);

export async function getObjectAttributesHandler(ctx: S3Context, bucket: string, key: string): Promise<void> {
  const header = ctx.req.headers['x-amz-object-attributes'];
  const asked = new Set(
    (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean),
  );
  if (asked.size === 0) {
    throw new S3Error(
      'InvalidArgument',
      'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty',
    );
  }
  if ([...asked].some((a) => !ATTRIBUTES.has(a))) throw new S3Error('InvalidArgument', 'Invalid attribute name specified.');
  const object = await getObject(ctx.deps, ctx.caller, bucket, key);
  const checksums = Object.entries(object.checksums ?? {}).filter((entry): entry is [ChecksumName, string] => Boolean(entry[1]));
  const doc: Record<string, unknown> = {};
  if (asked.has('ETag')) doc.ETag = object.etag;
  if (asked.has('Checksum') && checksums.length > 0) {
    doc.Checksum = {
      ...Object.fromEntries(checksums.map(([name, value]) => [`Checksum${CHECKSUM_LABELS[name]}`, value.replace(/-\d+$/, '')])),
      ChecksumType: checksumTypeOf(checksums[0]![1]),
    };
  }
  if (asked.has('ObjectParts') && object.parts) doc.ObjectParts = objectParts(ctx, object, checksums[0]?.[0]);
  if (asked.has('StorageClass')) doc.StorageClass = 'STANDARD';
  if (asked.has('ObjectSize')) doc.ObjectSize = object.size;
  sendXml(ctx, 200, 'GetObjectAttributesResponse', doc, { 'last-modified': new Date(object.lastModified).toUTCString() });
}

/** A page of a multipart object's parts, after `x-amz-part-number-marker`, at most `x-amz-max-parts` (1,000). */
function objectParts(ctx: S3Context, object: ObjectRecord, algorithm: ChecksumName | undefined) {
  const number = (name: string, fallback: number) => {
    const text = ctx.req.headers[name];
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!/^\d+$/.test(String(text)) || !Number.isSafeInteger(n))
      throw new S3Error('InvalidArgument', `${name} is not a non-negative integer`);
    return n;
  };
  const marker = number('x-amz-part-number-marker', 0);
  const max = Math.min(number('x-amz-max-parts', 1000), 1000);
  const count = object.parts!;
  // Sizes are kept for objects completed since part reads were added; without them, the count only.
  const sizes = object.partSizes ?? null;
  const numbers = sizes ? Array.from({ length: count }, (_, i) => i + 1).filter((n) => n > marker) : [];
  const page = numbers.slice(0, max);
  const truncated = numbers.length > page.length;
  return {
    PartNumberMarker: marker,
    ...(truncated ? { NextPartNumberMarker: page[page.length - 1] } : {}),
    MaxParts: max,
    IsTruncated: truncated,
    Part: page.map((n) => ({
      PartNumber: n,
      Size: sizes![n - 1],
      ...(algorithm && object.partChecksums?.[n - 1] ? { [`Checksum${CHECKSUM_LABELS[algorithm]}`]: object.partChecksums[n - 1] } : {}),
    })),
    PartsCount: count, // the SDK's TotalPartsCount
  };
}
