// UploadPartCopy: a part made of an object the caller owns, or a byte range of it. The bytes
// are read from Kubo (the source's CID, `cat` with an offset and length) and go into the part
// exactly as an uploaded part's do, with the part's MD5 and the upload's checksum computed on
// the way: the part is content of its own, added, held and counted like any other part.
import crypto from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createChecksum } from '../../infra/checksums.js';
import type { ObjectChecksums } from '../../infra/db/objects.js';
import type { Caller } from '../deps.js';
import { algorithmOf } from './checksums.js';
import { ownUpload, uploadPart, type MultipartDeps, type PartRecord } from './multipart.js';
import { getObject, type ObjectBody, type ObjectRecord } from './objects.js';

/** Which bytes of the source: the surface's reading of the request's range against the source's size. */
export type SourceSpan = (size: number) => { offset: number; length: number };

export async function copyPart(
  deps: MultipartDeps,
  caller: Caller,
  target: { bucket: string; key: string; uploadId: string; partNumber: number },
  source: { bucket: string; key: string },
  span: SourceSpan,
  /** Throws when the request's conditions on the source do not hold. */
  checkSource: (object: ObjectRecord) => void,
): Promise<{ part: PartRecord; source: ObjectRecord }> {
  const upload = await ownUpload(deps, caller, target.bucket, target.key, target.uploadId);
  const object = await getObject(deps, caller, source.bucket, source.key);
  checkSource(object);
  const { offset, length } = span(object.size);
  const abort = new AbortController();
  const body = hashedBody(
    Readable.from(length === 0 ? [] : deps.kubo.cat(object.cid, { offset, length, signal: abort.signal })),
    algorithmOf(upload),
    length,
  );
  try {
    return { part: await uploadPart(deps, caller, target, { ...body, signal: abort.signal }), source: object };
  } finally {
    abort.abort();
  }
}

/** `bytes` as an upload's body: its length, MD5 and `algorithm`'s checksum known once it has been read. */
function hashedBody(bytes: Readable, algorithm: Parameters<typeof createChecksum>[0] | undefined, declaredBytes: number): ObjectBody {
  const md5 = crypto.createHash('md5');
  const checksum = algorithm ? createChecksum(algorithm) : null;
  let read = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      md5.update(chunk);
      checksum?.update(chunk);
      read += chunk.length;
      done(null, chunk);
    },
  });
  const copied = pipeline(bytes, stream);
  const result = copied.then(async () => {
    if (read !== declaredBytes) throw new Error(`the source gave ${read} bytes, not ${declaredBytes}`);
    const checksums: ObjectChecksums = algorithm && checksum ? { [algorithm]: (await checksum.digest()).toString('base64') } : {};
    return { bytes: read, md5: md5.digest(), checksums };
  });
  // Awaited by the upload (readBody); a part refused before it reads (the quota) leaves it unread.
  result.catch(() => undefined);
  return { stream, result, declaredBytes };
}
