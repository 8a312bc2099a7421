// The audit of accounts, one user at a time (users by their {createdAt} index, each user's
// records by their {userId, …} indexes): the storage counter against a count of the user's
// records, each folder's fileCount against its files, the names counter against the names,
// and the workflows a user's live records need: a republish workflow per IPNS name, a pin
// workflow per queued or pinning request.
//
// A count that differs, or a workflow missing, is a suspect looked at again after a page of
// users (report.ts): a reservation or a record being counted is a write in flight, and a pin
// request's workflow starts just after its record. A request the API is pinning inline has no
// workflow at all (core/pins.ts): a `queued` one is in flight until the sweep would
// start its workflow (PIN_STALLED_MS), and only reported after that.
import { AUDIT_PAGE, PIN_STALLED_MS } from '../../infra/constants.js';
import type { FolderRecord } from '../../infra/db/folders.js';
import { ipnsNamesCounter } from '../../infra/db/ipns-names.js';
import { pinJobInput, type PinRecord } from '../../infra/db/pins.js';
import type { User } from '../../infra/db/users.js';
import type { Weight } from '../../infra/db/usage.js';
import type { AuditPart } from '../../infra/temporal/contracts/audit.js';
import { ipnsJob } from '../../infra/temporal/contracts/ipns.js';
import { pinJob } from '../../infra/temporal/contracts/pins.js';
import type { ActivityDeps } from '../deps.js';
import { createFindings, type Findings } from './report.js';

const same = (a: Weight, b: Weight) => a.files === b.files && a.pinned === b.pinned && a.used === b.used;
const agree = (c: { stored: Weight; fromRecords: Weight; holdingsOff: number }) => same(c.stored, c.fromRecords) && c.holdingsOff === 0;
const show = (w: Weight) => `files ${w.files}, pinned ${w.pinned}, used ${w.used}`;
const inFlight = (pin: PinRecord) => pin.status === 'queued' && pin.updatedAt > Date.now() - PIN_STALLED_MS;

export function createAccountAudit(deps: ActivityDeps) {
  const { db, jobs, config } = deps;

  async function storage(f: Findings, user: User, repair: boolean, beat: () => void): Promise<void> {
    const first = await db.usage.compare(user._id);
    if (!first || agree(first)) return;
    f.suspect(async () => {
      const compared = await db.usage.compare(user._id);
      if (!compared || agree(compared)) return null;
      let repaired: string | undefined;
      if (repair) {
        const now = await db.usage.recount(user._id, beat);
        repaired = `recounted: ${show(now)}`;
      }
      const holdings = compared.holdingsOff > 0 ? `; ${compared.holdingsOff} holding documents off` : '';
      return {
        kind: 'storage-counter',
        subject: user._id,
        userId: user._id,
        detail: `counter: ${show(compared.stored)}; records: ${show(compared.fromRecords)}${holdings}`,
        ...(repaired ? { repaired } : {}),
      };
    });
  }

  async function folders(f: Findings, user: User, repair: boolean): Promise<void> {
    let after: { createdAt: number; id: string } | undefined;
    for (;;) {
      const page: FolderRecord[] = await db.folders.list(user._id, { after, limit: AUDIT_PAGE });
      f.checked('folders', page.length);
      for (const folder of page) {
        if (folder.fileCount === undefined) continue; // a folder from before counting: counted when first read
        if ((await db.files.countInFolder(user._id, folder._id)) === folder.fileCount) continue;
        f.suspect(async () => {
          const again = await db.folders.findForUser(user._id, folder._id);
          const files = await db.files.countInFolder(user._id, folder._id);
          if (!again || again.fileCount === undefined || again.fileCount === files) return null;
          // Set only if the count did not move since it was read: a move in flight wins.
          const repaired = repair && (await db.folders.setFileCount(folder._id, again.fileCount, files));
          return {
            kind: 'folder-file-count',
            subject: folder._id,
            userId: user._id,
            detail: `fileCount ${again.fileCount}; files in it ${files}`,
            ...(repaired ? { repaired: `set to ${files}` } : {}),
          };
        });
      }
      if (page.length < AUDIT_PAGE) return;
      after = { createdAt: page.at(-1)!.createdAt, id: page.at(-1)!._id };
    }
  }

  async function names(f: Findings, user: User, repair: boolean): Promise<void> {
    const all = await db.ipnsNames.listForUser(user._id); // at most the plan's names
    const key = ipnsNamesCounter(user._id);
    if ((await db.counters.get(key)) !== all.length)
      f.suspect(async () => {
        const [counted, now] = [await db.counters.get(key), await db.ipnsNames.listForUser(user._id)];
        if (counted === now.length) return null;
        // A create takes the count before it writes the name, a delete gives it back after, each
        // a moment apart: still off a second later, a process died between the two. Set only if
        // the count did not move since it was read, so a create or delete meanwhile wins.
        const repaired = repair && (await db.counters.setIf(key, counted, now.length));
        return {
          kind: 'ipns-name-count',
          subject: user._id,
          userId: user._id,
          detail: `names counter ${counted}; names ${now.length}`,
          ...(repaired ? { repaired: `set to ${now.length}` } : {}),
        };
      });
    for (const name of all) {
      f.checked('ipnsNames');
      if ((await jobs.state(ipnsJob, { ipnsName: name._id })).state === 'running') continue;
      f.suspect(async () => {
        if (!(await db.ipnsNames.get(name._id))) return null; // deleted meanwhile
        if ((await jobs.state(ipnsJob, { ipnsName: name._id })).state === 'running') return null;
        if (repair) await jobs.start(ipnsJob, { userId: user._id, ipnsName: name._id, republishEveryMs: config.ipns.republishEveryMs });
        return {
          kind: 'name-without-republish',
          subject: name._id,
          userId: user._id,
          detail: 'no running republish workflow',
          ...(repair ? { repaired: 'started it' } : {}),
        };
      });
    }
  }

  async function pins(f: Findings, user: User, repair: boolean): Promise<void> {
    for (const status of ['queued', 'pinning'] as const) {
      let after: { createdAt: number; id: string } | undefined;
      for (;;) {
        const page: PinRecord[] = await db.pins.list(user._id, { status, after, limit: AUDIT_PAGE });
        f.checked('activePins', page.length);
        for (const pin of page) {
          const key = { cid: pin.cid, userId: pin.userId };
          if (inFlight(pin) || (await jobs.state(pinJob, key)).state === 'running') continue;
          f.suspect(async () => {
            const now = await db.pins.byRequestId(pin.requestId);
            if (!now || (now.status !== 'queued' && now.status !== 'pinning') || inFlight(now)) return null;
            if ((await jobs.state(pinJob, key)).state === 'running') return null;
            if (repair) await jobs.start(pinJob, pinJobInput(now));
            return {
              kind: 'pin-without-job',
              subject: pin.requestId,
              userId: user._id,
              detail: `${now.status}, with no running pin workflow`,
              ...(repair ? { repaired: 'started it' } : {}),
            };
          });
        }
        if (page.length < AUDIT_PAGE) break;
        after = { createdAt: page.at(-1)!.createdAt, id: page.at(-1)!._id };
      }
    }
  }

  return async function auditAccounts(repair: boolean, progress: () => void): Promise<AuditPart> {
    const f = createFindings();
    for (let after: string | undefined; ;) {
      const page = (await db.users.list(AUDIT_PAGE, after)) ?? [];
      for (const user of page) {
        f.checked('users');
        await storage(f, user, repair, progress);
        await folders(f, user, repair);
        await names(f, user, repair);
        await pins(f, user, repair);
        progress();
      }
      await f.settle();
      if (page.length < AUDIT_PAGE) return f.part;
      after = page.at(-1)!._id;
    }
  };
}
