// Listing a bucket's keys (ListObjects v1 and v2, ListObjectVersions): in key order (bytewise
// UTF-8, as MongoDB orders strings and S3 lists), from an exclusive start, within a prefix,
// keys past the delimiter rolled up into common prefixes. Each query is one index range of
// at most a page: a common prefix is stepped over with a new range starting after it, never by
// reading the keys under it, so a page costs the same in a bucket of any size.
import { afterPrefix, type ObjectRecord } from '../../infra/db/objects.js';
import { S3_MAX_KEYS } from '../../infra/constants.js';
import type { Caller, UseCaseDeps } from '../deps.js';
import { ownBucket } from './buckets.js';

export interface ListQuery {
  prefix: string;
  delimiter: string;
  /** Keys (and common prefixes) after this one only: marker, start-after or a continuation. */
  after: string;
  maxKeys: number;
}

export interface Listing {
  objects: ObjectRecord[];
  commonPrefixes: string[];
  truncated: boolean;
  /** The last key or common prefix listed: where the next page starts after. */
  last: string | null;
}

const before = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b)) <= 0;

export async function listObjects(deps: Pick<UseCaseDeps, 'db'>, caller: Caller, bucketName: string, q: ListQuery): Promise<Listing> {
  const bucket = await ownBucket(deps, caller, bucketName);
  const maxKeys = Math.min(Math.max(q.maxKeys, 0), S3_MAX_KEYS);
  const below = q.prefix ? afterPrefix(q.prefix) : undefined;
  const from = q.prefix || undefined;
  const listing: Listing = { objects: [], commonPrefixes: [], truncated: false, last: null };
  // No keys asked for: S3 answers an empty page that is not truncated.
  if (maxKeys === 0) return listing;
  let cursor = q.after || undefined;
  let count = 0;
  for (;;) {
    const want = maxKeys - count + 1; // one more than fits tells whether there are more
    const batch = await deps.db.objects.range(bucket._id, { after: cursor, from, below, limit: Math.min(want, S3_MAX_KEYS + 1) });
    let skipped = false;
    for (const object of batch) {
      const at = q.delimiter ? object.key.indexOf(q.delimiter, q.prefix.length) : -1;
      const entry = at >= 0 ? object.key.slice(0, at + q.delimiter.length) : object.key;
      if (at >= 0 && q.after && before(entry, q.after)) {
        // A common prefix at or before where the page starts (a marker that is a prefix).
        cursor = afterPrefix(entry);
        skipped = true;
        break;
      }
      if (count === maxKeys) {
        listing.truncated = true;
        return listing;
      }
      count += 1;
      listing.last = entry;
      if (at < 0) {
        listing.objects.push(object);
        cursor = object.key;
        continue;
      }
      listing.commonPrefixes.push(entry);
      // Past every key under it, in a new range.
      cursor = afterPrefix(entry);
      skipped = true;
      break;
    }
    // A batch read to its end without stepping over a prefix was all there is.
    if (!skipped) return listing;
  }
}
