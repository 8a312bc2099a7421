// A user's records counted a page of contents at a time, in multihash order: what a rebuild
// writes and the audit compares (usage.ts). Memory stays bounded by the page whatever the user
// holds: a user with a million files is read as pages of USAGE_TALLY_PAGE records of each
// kind, each page a range query on a {userId, multihash} index, never as one array.
import { userContentKey } from './by-id.js';
import { stepped, weigh, type HoldKind, type HoldRecord, type Weight } from './usage-records.js';

/** Reads of one user's records of each kind that holds content (infra/db/index.ts). */
export interface UserRecords {
  /** Records of `kind` whose content sorts after `after`, in multihash order, at most `limit`. */
  after(kind: HoldKind, userId: string, after: string, limit: number): Promise<{ multihash: string; size: number }[]>;
  /** How many records of `kind` hold the content. */
  count(kind: HoldKind, userId: string, multihash: string): Promise<number>;
}

export interface ContentPage {
  /** The holding documents the records make, by `_id`. */
  counted: Map<string, Partial<HoldRecord>>;
}

const KINDS: HoldKind[] = ['file', 'pin', 'object'];

export function totalOf(counted: Map<string, Partial<HoldRecord>>): Weight {
  const total: Weight = { files: 0, pinned: 0, used: 0 };
  for (const doc of counted.values()) {
    const w = weigh(doc);
    total.files += w.files;
    total.pinned += w.pinned;
    total.used += w.used;
  }
  return total;
}

export async function* contentPages(records: UserRecords, userId: string, limit: number): AsyncGenerator<ContentPage> {
  const key = (multihash: string) => userContentKey(userId, multihash);
  for (let after = ''; ;) {
    const pages = await Promise.all(KINDS.map((kind) => records.after(kind, userId, after, limit)));
    // A full page may end inside a content: the contents before the first such end are whole.
    const ends = pages.filter((p) => p.length === limit).map((p) => p.at(-1)!.multihash);
    const bound = ends.length === 0 ? undefined : ends.reduce((a, b) => (a < b ? a : b));
    const counted = new Map<string, Partial<HoldRecord>>();
    let last = after;
    KINDS.forEach((kind, i) => {
      for (const r of pages[i]!) {
        if (bound !== undefined && r.multihash >= bound) continue;
        counted.set(key(r.multihash), stepped(counted.get(key(r.multihash)) ?? null, kind, 1, r.size));
        if (r.multihash > last) last = r.multihash;
      }
    });
    if (bound === undefined) {
      yield { counted };
      return;
    }
    if (counted.size === 0) {
      // A page of records of one content and more: counted by index, not read.
      const [file, pin, object] = await Promise.all(KINDS.map((kind) => records.count(kind, userId, bound)));
      const size = Math.max(0, ...pages.flat().flatMap((r) => (r.multihash === bound ? [r.size] : [])));
      counted.set(key(bound), { file, pin, object, size });
      last = bound;
    }
    yield { counted };
    after = last;
  }
}
