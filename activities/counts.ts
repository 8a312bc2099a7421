// The sweep's check of counters (activities/holds.ts runs it over each round's changes). A
// request moves a user's holding counts (infra/db/usage.ts) and folders' fileCount after its
// record is written or removed; an API process killed between the two leaves them off by that
// record (measured by npm run chaos), and without a transaction (FerretDB 1.24 has none) no
// order of the writes avoids it. So such a change is logged before its record, naming whose
// counters it moves (CountedIn, infra/db/hold-changes.ts), and once it has settled (its writer
// is done or dead: COUNT_CHECK_AFTER_MS) the sweep compares those counters with the records,
// looks again a moment later, and repairs what still differs: the user is recounted
// (usage.recount, exact beside the user's traffic), a folder's count is set to its files unless
// it moved meanwhile. Each change is checked once, with the round's others: four reads by index
// per COUNT_CHECK_PAGE changes. A change marked `recount` (a request that could not tell whether
// its write of the user's storage counter was applied: core/content.ts) has its user
// recounted, since a reservation that leaked shows in no holding; so has a change whose process
// (`by`) was not seen alive once the change had settled (killed between an upload's reservation
// and its record, say: infra/db/processes.ts).
import pLimit from 'p-limit';
import { COUNT_CHECK_PAGE, COUNT_SECOND_LOOK_MS, WRITER_SETTLE_MS } from '../infra/constants.js';
import type { HoldChange } from '../infra/db/hold-changes.js';
import type { ActivityDeps } from './deps.js';

export interface CountCheckResult {
  /** Users' holdings of content and folders compared with their records. */
  countsChecked: number;
  /** Users recounted, folders whose count was set. */
  recounted: number;
  foldersSet: number;
}

export function createCountCheck({ db }: Pick<ActivityDeps, 'db'>) {
  const holdings = new Map<string, { userId: string; multihash: string }>();
  const folders = new Map<string, string>(); // folderId → userId
  /** Users whose counter a request could not keep exact (a lost answer): recounted. */
  const recounts = new Set<string>();
  /** Changes by the process that logged them: their users are recounted if it died before they settled. */
  const logged: { by: string; at: number; userId: string }[] = [];
  const limit = pLimit(16);

  /** Whether each holding agrees with its records, a page of them per query (usage.ts). */
  async function holdingsAgree(held: { userId: string; multihash: string }[]): Promise<boolean[]> {
    const pages: (typeof held)[] = [];
    for (let i = 0; i < held.length; i += COUNT_CHECK_PAGE) pages.push(held.slice(i, i + COUNT_CHECK_PAGE));
    return (await Promise.all(pages.map((page) => limit(() => db.usage.holdingsAgree(page))))).flat();
  }

  /** A folder's stored count and its files, when they differ (a folder gone or not counted: null). */
  async function folderOff(userId: string, folderId: string): Promise<{ stored: number; files: number } | null> {
    const folder = await db.folders.findForUser(userId, folderId);
    if (folder?.fileCount === undefined) return null;
    const files = await db.files.countInFolder(userId, folderId);
    return files === folder.fileCount ? null : { stored: folder.fileCount, files };
  }

  return {
    /** A change to check in this round. */
    note(change: HoldChange): void {
      if (!change.userId) return;
      if (change.recount) recounts.add(change.userId);
      if (change.by) logged.push({ by: change.by, at: change.at, userId: change.userId });
      holdings.set(`${change.userId}:${change.multihash}`, { userId: change.userId, multihash: change.multihash });
      for (const folderId of change.folders ?? []) folders.set(folderId, change.userId);
    },

    /** Compares, looks again at what differed, repairs what still does. */
    async settle(): Promise<CountCheckResult> {
      const held = [...holdings.values()];
      const counted = [...folders];
      const agrees = await holdingsAgree(held);
      const firstLook = await Promise.all(counted.map(([folderId, userId]) => limit(() => folderOff(userId, folderId))));
      const suspects = held.filter((_, i) => !agrees[i]);
      const suspectFolders = counted.flatMap(([folderId, userId], i) => (firstLook[i] ? [{ folderId, userId, first: firstLook[i] }] : []));
      const result = { countsChecked: held.length + counted.length, recounted: 0, foldersSet: 0 };
      // A change is checked COUNT_CHECK_AFTER_MS after it was logged: a process that beat once its
      // request had settled (WRITER_SETTLE_MS) lived through it, one that did not has been gone for
      // PROCESS_GONE_AFTER_MS by now (or could not beat: then the recount was not needed, and is exact anyway).
      const seen = await db.processes.lastSeen([...new Set(logged.map((r) => r.by))]);
      for (const r of logged) if ((seen.get(r.by) ?? 0) < r.at + WRITER_SETTLE_MS) recounts.add(r.userId);
      if (suspects.length === 0 && suspectFolders.length === 0 && recounts.size === 0) return result;

      // A write in flight is a moment behind its record; what differs twice is left behind.
      const users = new Set(recounts);
      if (suspects.length > 0 || suspectFolders.length > 0) await new Promise((resolve) => setTimeout(resolve, COUNT_SECOND_LOOK_MS));
      const again = await holdingsAgree(suspects);
      suspects.forEach((h, i) => again[i] || users.add(h.userId));
      await Promise.all(
        [...users].map((userId) =>
          limit(async () => {
            await db.usage.recount(userId);
            result.recounted++;
          }),
        ),
      );
      for (const { folderId, userId, first } of suspectFolders) {
        // Only a difference that stood still: a busy folder is left to the next change or the audit.
        const off = await folderOff(userId, folderId);
        if (!off || off.stored !== first.stored || off.files !== first.files) continue;
        if (await db.folders.setFileCount(folderId, off.stored, off.files)) result.foldersSet++;
      }
      return result;
    },
  };
}
