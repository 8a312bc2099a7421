// Kubo's MFS as a keep-alive for content that no hold covers yet: an S3 multipart upload's
// parts live under `<MFS_ROOT>/<uploadId>/<part number>` from the moment each is answered
// until the upload completes or is aborted. Kubo's garbage collector never removes what MFS
// links, and each upload has its own directory, so dropping one upload's parts cannot touch
// another's (a Kubo pin, by contrast, is one flag per CID shared by every upload holding the
// same bytes).
import type { Kubo } from './kubo.js';

const MFS_ROOT = '/stupa/multipart';

const uploadDir = (uploadId: string) => `${MFS_ROOT}/${uploadId}`;
const missing = (err: unknown) => /not exist|no link|file does not exist/i.test((err as Error).message);

/** Links `cid` at the upload's part, replacing what was there. */
export async function keepPart(kubo: Kubo, uploadId: string, partNumber: number, cid: string): Promise<void> {
  const path = `${uploadDir(uploadId)}/${partNumber}`;
  await kubo.files.rm(path).catch(() => undefined);
  await kubo.files.mkdir(uploadDir(uploadId), { parents: true });
  await kubo.files.cp(`/ipfs/${cid}`, path);
}

/** Unlinks every part of the upload (nothing to do when there are none). */
export async function dropParts(kubo: Kubo, uploadId: string): Promise<void> {
  try {
    await kubo.files.rm(uploadDir(uploadId), { recursive: true });
  } catch (err) {
    if (!missing(err)) throw err;
  }
}

/** The uploads that have parts kept in MFS, as Kubo lists them (the audit's walk). */
export async function* uploadsWithParts(kubo: Kubo): AsyncGenerator<string> {
  try {
    for await (const entry of kubo.files.ls(MFS_ROOT)) yield entry.name;
  } catch (err) {
    if (!missing(err)) throw err;
  }
}

/** The part numbers the upload has kept in MFS. */
export async function keptParts(kubo: Kubo, uploadId: string): Promise<Set<number>> {
  const numbers = new Set<number>();
  try {
    for await (const entry of kubo.files.ls(uploadDir(uploadId))) numbers.add(Number(entry.name));
  } catch (err) {
    if (!missing(err)) throw err;
  }
  return numbers;
}
