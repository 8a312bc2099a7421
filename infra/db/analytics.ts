// Usage events per user and UTC day, counted as they happen: what GET /analytics reads.
//
// One document per user and day (`_id` = `<userId>:<YYYY-MM-DD>`), changed only by `$inc`
// upserts: each event is one single-document atomic update, so concurrent events never lose a
// count, and no request path ever scans the events themselves (there are none to scan). The
// day is computed here from the event's time, in UTC, because the server has no date
// operators to group by day later (FerretDB 1.24), and a day key decided at write time is
// what lets a read be a range over at most a year of documents through the {userId, day}
// index.
//
// A day document:
//   { _id, userId, day: 'YYYY-MM-DD',
//     uploads, uploadBytes,        files recorded that day and their bytes (the same content
//                                  uploaded again counts again: it is an upload)
//     types: { <type>: uploads },  the same uploads by MIME type; MongoDB field names may not
//                                  contain `.` nor start with `$`, so those (and `%`) are
//                                  percent-encoded (`text/x.y` is stored as `text/x%2Ey`)
//     deletes, unpins,             file records and pinned pin requests removed
//     pins, publishes,             pin requests made, IPNS publishes
//     gatewayBytes,                bytes the gateway sent for the user's content
//     storedBytes }                net change of the user's distinct stored bytes that day
//                                  (infra/db/usage.ts), from which storage growth is derived
// A field is absent until its first event. One document per user and month
// (`activity_months`, `<userId>:<YYYY-MM>`) also sums `storedBytes`, so that the storage at
// the end of a period long past is found from a few month documents instead of every day
// since (core/analytics.ts).
//
// Events recorded together share their updates (batch.ts: their increments are summed per user
// and day first); each caller still waits for the write that carries its event.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { ACTIVITY_MAX_DAYS } from '../constants.js';
import { groupCommit } from './batch.js';
import { isDuplicateKey } from './errors.js';
import { BYTES } from './bytes.js';

/** What one event (or several) adds to a user's day. Every count is a difference, may be 0. */
export interface AnalyticsChange {
  uploads?: number;
  uploadBytes?: number;
  /** The type of the uploaded file(s): counts `uploads` (1 when absent) of it. */
  mimeType?: string;
  deletes?: number;
  unpins?: number;
  pins?: number;
  publishes?: number;
  gatewayBytes?: number;
  storedBytes?: number;
}

const COUNTS = ['uploads', 'uploadBytes', 'deletes', 'unpins', 'pins', 'publishes', 'gatewayBytes', 'storedBytes'] as const;
type Count = (typeof COUNTS)[number];

export type AnalyticsDay = { _id: string; userId: string; day: string; types?: Record<string, number> } & Partial<Record<Count, number>>;

interface AnalyticsMonth {
  _id: string;
  userId: string;
  month: string;
  storedBytes?: number;
}

const daySchema = new Schema<AnalyticsDay>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    day: { type: String, required: true },
    // Doubles (BYTES): byte counts pass 2^31, where FerretDB 1.24 wraps an int32 field's `$inc`.
    ...Object.fromEntries(COUNTS.map((c) => [c, { type: BYTES }])),
    types: { type: Schema.Types.Mixed },
  },
  { versionKey: false, minimize: false },
);
daySchema.index({ userId: 1, day: 1 });

const monthSchema = new Schema<AnalyticsMonth>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    month: { type: String, required: true },
    storedBytes: { type: BYTES },
  },
  { versionKey: false },
);
monthSchema.index({ userId: 1, month: 1 });

/** The UTC day of a time, `YYYY-MM-DD`. */
export const utcDay = (at: number): string => new Date(at).toISOString().slice(0, 10);

/**
 * A MIME type as counted: lower case, without parameters; anything that is not `type/subtype`
 * of token characters (at most 127 of them) counts as application/octet-stream, so a client
 * cannot grow a day's document with arbitrary keys.
 */
export function countedType(mimeType: string): string {
  const bare = mimeType.split(';')[0]!.trim().toLowerCase();
  return /^[a-z0-9][a-z0-9!#$&^_.+-]{0,62}\/[a-z0-9!#$&^_.+-]{1,63}$/.test(bare) ? bare : 'application/octet-stream';
}

/** A counted type as a field name: `%`, `.` and `$` percent-encoded. */
export const encodeType = (type: string): string => type.replace(/[%.$]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
export const decodeType = (field: string): string =>
  field.replace(/%(25|2E|24)/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));

interface Pending {
  userId: string;
  day: string;
  inc: Record<string, number>;
}

export function createAnalyticsStore(conn: Connection) {
  const Days: Model<AnalyticsDay> = conn.model<AnalyticsDay>('AnalyticsDay', daySchema, 'activity');
  const Months: Model<AnalyticsMonth> = conn.model<AnalyticsMonth>('AnalyticsMonth', monthSchema, 'activity_months');

  /** `$inc` upsert; two inserts racing on a new key make one an update (as files.ts explains). */
  async function increment<T>(model: Model<T>, _id: string, inc: Record<string, number>, onInsert: Record<string, string>) {
    const write = () => model.updateOne({ _id }, { $inc: inc, $setOnInsert: onInsert }, { upsert: true }).exec();
    try {
      await write();
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      await write();
    }
  }

  async function flush(p: Pending): Promise<void> {
    const inc = Object.fromEntries(Object.entries(p.inc).filter(([, n]) => n !== 0));
    if (Object.keys(inc).length === 0) return;
    const writes = [increment(Days, `${p.userId}:${p.day}`, inc, { userId: p.userId, day: p.day })];
    if (inc.storedBytes) {
      const month = p.day.slice(0, 7);
      writes.push(increment(Months, `${p.userId}:${month}`, { storedBytes: inc.storedBytes }, { userId: p.userId, month }));
    }
    await Promise.all(writes);
  }

  // Events recorded together share their writes (batch.ts): summed per user and day.
  const together = groupCommit(async (events: { userId: string; day: string; change: AnalyticsChange }[]) => {
    const byKey = new Map<string, Pending>();
    for (const { userId, day, change } of events) {
      const key = `${userId}:${day}`;
      const p = byKey.get(key) ?? { userId, day, inc: {} };
      byKey.set(key, p);
      for (const c of COUNTS) if (change[c]) p.inc[c] = (p.inc[c] ?? 0) + change[c];
      if (change.mimeType !== undefined) {
        const field = `types.${encodeType(countedType(change.mimeType))}`;
        p.inc[field] = (p.inc[field] ?? 0) + (change.uploads ?? 1);
      }
    }
    const failed = new Map<string, Error>();
    await Promise.all([...byKey].map(([key, p]) => flush(p).catch((err: Error) => void failed.set(key, err))));
    return events.map(({ userId, day }) => failed.get(`${userId}:${day}`));
  });

  /** Counts `change` on the user's day of `at` (ms). Resolves once it is written. */
  const record = (userId: string, at: number, change: AnalyticsChange): Promise<void> => together({ userId, day: utcDay(at), change });

  return {
    days: Days,
    months: Months,

    record,

    /**
     * `record`, for the use-cases that count what they did: the event (an upload, a delete)
     * has happened when it is counted, and a counter that cannot be written must not turn it
     * into an error the client would retry; the analytics then miss that event.
     */
    tryRecord(userId: string, at: number, change: AnalyticsChange): Promise<void> {
      return record(userId, at, change).catch(() => undefined);
    },

    /**
     * The user's day documents from `fromDay` to `toDay` (inclusive, `YYYY-MM-DD`), oldest
     * first: days without events have none. One index range; at most ACTIVITY_MAX_DAYS are
     * read, so callers ask for at most that many days.
     */
    range: (userId: string, fromDay: string, toDay: string) =>
      Days.find({ userId, day: { $gte: fromDay, $lte: toDay } })
        .sort({ day: 1 })
        .limit(ACTIVITY_MAX_DAYS)
        .lean<AnalyticsDay[]>()
        .exec(),

    /** Net stored bytes of the user's months from `fromMonth` to `toMonth` (inclusive, `YYYY-MM`), summed. */
    async storedInMonths(userId: string, fromMonth: string, toMonth: string): Promise<number> {
      if (fromMonth > toMonth) return 0;
      const rows = await Months.find({ userId, month: { $gte: fromMonth, $lte: toMonth } }, { storedBytes: 1 })
        .lean<Pick<AnalyticsMonth, 'storedBytes'>[]>()
        .exec();
      return rows.reduce((sum, r) => sum + (r.storedBytes ?? 0), 0);
    },
  };
}

export type ActivityStore = ReturnType<typeof createAnalyticsStore>;
