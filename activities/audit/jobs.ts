// The audit of what runs and what is kept for records: the running pin and republish
// workflows against their records (Temporal's visibility store, page by page), and the parts
// of S3 multipart uploads kept in Kubo's MFS against the open uploads and their part records.
import { tryParseCid } from '../../infra/ipfs/cid.js';
import { AUDIT_PAGE, S3_MAX_PARTS } from '../../infra/constants.js';
import { dropParts, keptParts, uploadsWithParts } from '../../infra/ipfs/kubo-mfs.js';
import type { AuditPart } from '../../infra/temporal/contracts/audit.js';
import { DELETE_SIGNAL, ipnsJob } from '../../infra/temporal/contracts/ipns.js';
import { pinJob } from '../../infra/temporal/contracts/pins.js';
import type { ActivityDeps } from '../deps.js';
import { createFindings, type Findings } from './report.js';

export function createJobAudit(deps: ActivityDeps) {
  const { db, jobs, kubo } = deps;

  /** Each running pin workflow (`pin:<cid>:<userId>`) has its queued or pinning request. */
  async function pinJobs(f: Findings): Promise<void> {
    for await (const id of jobs.running(pinJob)) {
      f.checked('pinJobs');
      const [, cid = '', userId = ''] = /^pin:(.+):([^:]+)$/.exec(id) ?? [];
      const parsed = tryParseCid(cid);
      const live = async () => {
        const pin = parsed ? await db.pins.findForUser(userId, parsed.multihash) : null;
        return pin?.status === 'queued' || pin?.status === 'pinning';
      };
      if (await live()) continue;
      f.suspect(async () => {
        if ((await live()) || (await jobs.state(pinJob, { cid, userId })).state !== 'running') return null; // it ended meanwhile
        return { kind: 'job-without-record', subject: id, userId, detail: 'a running pin workflow; its request is gone, pinned or failed' };
      });
    }
    await f.settle();
  }

  /** Each running republish workflow (`ipns:<name>`) has its name. */
  async function nameJobs(f: Findings, repair: boolean): Promise<void> {
    for await (const id of jobs.running(ipnsJob)) {
      f.checked('republishJobs');
      const ipnsName = id.slice('ipns:'.length);
      if (await db.ipnsNames.get(ipnsName)) continue;
      // A name is deleted before its workflow is told to end: the second look lets that arrive.
      f.suspect(async () => {
        if ((await jobs.state(ipnsJob, { ipnsName })).state !== 'running' || (await db.ipnsNames.get(ipnsName))) return null;
        if (repair) await jobs.signal(ipnsJob, { ipnsName }, DELETE_SIGNAL, []);
        return {
          kind: 'job-without-record',
          subject: id,
          detail: 'a running republish workflow; its name is deleted',
          ...(repair ? { repaired: 'signalled it to end' } : {}),
        };
      });
    }
    await f.settle();
  }

  /** Parts kept in MFS belong to an upload record; an open upload's part records have their bytes kept. */
  async function parts(f: Findings, repair: boolean): Promise<void> {
    for await (const uploadId of uploadsWithParts(kubo)) {
      f.checked('uploadsWithParts');
      if (!(await db.multipart.get(uploadId))) {
        // An upload being created writes its record first; one being aborted or completed drops
        // its parts before its record. So parts without a record, still so on the second look,
        // are left by a process that died: no upload can use them again (ids are never reused).
        f.suspect(async () => {
          if ((await db.multipart.get(uploadId)) || (await keptParts(kubo, uploadId)).size === 0) return null;
          if (repair) await dropParts(kubo, uploadId);
          return {
            kind: 'parts-without-upload',
            subject: uploadId,
            detail: 'parts kept in MFS; no upload record',
            ...(repair ? { repaired: 'unlinked them' } : {}),
          };
        });
      }
    }
    await f.settle();
    // Each open upload's recorded parts have their bytes kept (a part is kept before it is recorded).
    for (let page = await db.multipart.openPage(AUDIT_PAGE); page.length > 0; page = await db.multipart.openPage(AUDIT_PAGE, page.at(-1))) {
      f.checked('openUploads', page.length);
      for (const upload of page) {
        const lost = async () => {
          const kept = await keptParts(kubo, upload._id);
          return (await db.multipart.listParts(upload._id, 0, S3_MAX_PARTS))
            .filter((p) => !kept.has(p.partNumber))
            .map((p) => p.partNumber);
        };
        if ((await lost()).length === 0) continue;
        // An upload being aborted leaves `open` before its parts go.
        f.suspect(async () => {
          const missing = (await db.multipart.get(upload._id))?.state === 'open' ? await lost() : [];
          if (missing.length === 0) return null;
          return {
            kind: 'upload-without-parts',
            subject: upload._id,
            userId: upload.userId,
            detail: `part ${missing.join(', ')} recorded; its bytes are not kept in MFS`,
          };
        });
      }
      await f.settle();
    }
  }

  return async function auditJobs(repair: boolean): Promise<AuditPart> {
    const f = createFindings();
    await pinJobs(f);
    await nameJobs(f, repair);
    await parts(f, repair);
    await f.settle();
    return f.part;
  };
}
