// The checksums of a multipart object, from its parts' (S3's COMPOSITE and FULL_OBJECT types),
// and the check of what CompleteMultipartUpload's headers expect of them.
import { combineCrcs, compositeChecksum, isCrc, type ChecksumName } from '../../infra/checksums.js';
import type { MultipartUploadRecord, PartRecord } from '../../infra/db/multipart.js';
import type { ObjectChecksums } from '../../infra/db/objects.js';
import { InvalidInput } from '../errors.js';

/** What the client expects of the object: its checksum type, its checksum (either optional). */
export interface ExpectedChecksums {
  type?: string;
  checksums: ObjectChecksums;
}

export const algorithmOf = (upload: MultipartUploadRecord) => upload.checksumAlgorithm?.toLowerCase() as ChecksumName | undefined;

/**
 * The multipart object's checksum, from its parts' (no byte is read again): COMPOSITE, the
 * algorithm over the parts' binary checksums, `-<parts>`; FULL_OBJECT, the CRC of the whole
 * object (infra/checksums.ts). None when the upload named no algorithm, or a part lacks it (a
 * part from before parts had to carry it).
 */
export async function objectChecksums(upload: MultipartUploadRecord, parts: PartRecord[]): Promise<ObjectChecksums> {
  const name = algorithmOf(upload);
  if (!name || !parts.every((p) => p.checksums?.[name])) return {};
  const digests = parts.map((p) => Buffer.from(p.checksums[name]!, 'base64'));
  if (upload.checksumType === 'FULL_OBJECT' && isCrc(name)) {
    return {
      [name]: combineCrcs(
        name,
        digests.map((crc, i) => ({ crc, size: parts[i]!.size })),
      ).toString('base64'),
    };
  }
  return { [name]: `${(await compositeChecksum(name, digests)).toString('base64')}-${parts.length}` };
}

/** What CompleteMultipartUpload's headers expect of the object: its upload's checksum type, and
 * its checksum (a composite one with or without its `-<parts>`). */
export async function checkExpected(upload: MultipartUploadRecord, parts: PartRecord[], expected: ExpectedChecksums): Promise<void> {
  const type = upload.checksumType ?? (upload.checksumAlgorithm ? 'COMPOSITE' : null);
  if (expected.type !== undefined && expected.type !== type) {
    throw new InvalidInput(
      `The upload was created using the ${type ?? 'null'} checksum mode. The complete request must use the same checksum mode.`,
      'CHECKSUM_MODE_MISMATCH',
    );
  }
  const entries = Object.entries(expected.checksums);
  if (entries.length === 0) return;
  const computed = await objectChecksums(upload, parts);
  for (const [name, value] of entries) {
    const ours = computed[name as ChecksumName];
    if (!ours || (value !== ours && value !== ours.replace(/-\d+$/, ''))) {
      throw new InvalidInput(`The ${name} you specified did not match the calculated checksum.`, 'BAD_DIGEST');
    }
  }
}

/** Each part's checksum of the upload's algorithm, in order: kept on the object for reads by part. */
export function partChecksumsOf(upload: MultipartUploadRecord, parts: PartRecord[]): string[] | null {
  const name = algorithmOf(upload);
  if (!name || !parts.every((p) => p.checksums?.[name])) return null;
  return parts.map((p) => p.checksums[name]!);
}
