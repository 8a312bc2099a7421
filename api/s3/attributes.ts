// GetObjectAttributes (`GET /<bucket>/<key>?attributes`): what is kept about an object, without
// its bytes, for the attributes named in `x-amz-object-attributes` (ETag, Checksum, ObjectParts,
// StorageClass, ObjectSize). A composite checksum is given without its `-<parts>`, and a
// multipart object's parts as their count, as S3 answers.
import { CHECKSUM_LABELS, checksumTypeOf, type ChecksumName } from '../../infra/checksums.js';
import { getObject } from '../usecases/s3/objects.js';
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
  if (asked.has('ObjectParts') && object.parts) doc.ObjectParts = { PartsCount: object.parts }; // the SDK's TotalPartsCount
  if (asked.has('StorageClass')) doc.StorageClass = 'STANDARD';
  if (asked.has('ObjectSize')) doc.ObjectSize = object.size;
  sendXml(ctx, 200, 'GetObjectAttributesResponse', doc, { 'last-modified': new Date(object.lastModified).toUTCString() });
}
