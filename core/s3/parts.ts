// The parts of an S3 multipart upload: their records and their bytes in Kubo's MFS. Shared by
// the upload's own use-cases (multipart.ts) and by a bucket's delete, which aborts what is open.
import type { MultipartUploadRecord, PartRecord } from '../../infra/db/multipart.js';
import { dropParts } from '../../infra/ipfs/kubo-mfs.js';
import type { UseCaseDeps } from '../deps.js';

/** Every part of the upload, read a page of 1,000 at a time. */
export async function allParts(deps: Pick<UseCaseDeps, 'db'>, uploadId: string): Promise<PartRecord[]> {
  const parts: PartRecord[] = [];
  for (
    let page = await deps.db.multipart.listParts(uploadId, 0, 1000);
    page.length > 0;
    page = await deps.db.multipart.listParts(uploadId, page.at(-1)!.partNumber, 1000)
  ) {
    parts.push(...page);
  }
  return parts;
}

/** Aborts an open upload (false if it is completing or completed). Repeating it finishes it. */
export async function abortUpload(deps: Pick<UseCaseDeps, 'db' | 'kubo'>, upload: MultipartUploadRecord): Promise<boolean> {
  if (!(await deps.db.multipart.transition(upload._id, ['open', 'aborted'], 'aborted'))) return false;
  await releaseParts(deps, upload, []);
  await deps.db.multipart.deleteUpload(upload._id);
  return true;
}

/**
 * Deletes the upload's part records and unlinks their bytes. Each part's reservation is given
 * back by whoever deletes its record, except the `kept` ones: the object's hold took theirs.
 */
export async function releaseParts(deps: Pick<UseCaseDeps, 'db' | 'kubo'>, upload: MultipartUploadRecord, kept: number[]): Promise<void> {
  const keep = new Set(kept);
  for (const part of await allParts(deps, upload._id)) {
    const removed = await deps.db.multipart.deletePart(part._id);
    if (removed && !keep.has(removed.partNumber)) await deps.db.usage.add(upload.userId, { used: -removed.size });
  }
  await dropParts(deps.kubo, upload._id);
}
