// The log of hold changes: the sweep's input. Every change to a record that holds content is
// appended here before its sync signal is sent (core/hold-sync.ts), so a signal lost while
// Temporal is down is still on record, and the sweep (activities/holds.ts) checks only the
// content that changed since its watermark instead of every held CID and every Cluster pin.
import crypto from 'node:crypto';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { groupCommit } from './batch.js';

/**
 * Whose counters a change moves, when a request moves them after its record (a file's upload,
 * delete or move): the user's holding of the content (infra/db/usage.ts) and the folders'
 * fileCount. Logged before the record changes, so a process killed between the record and its
 * counters leaves the sweep an entry that names them (activities/counts.ts).
 */
export interface CountedIn {
  userId: string;
  folders?: (string | null | undefined)[];
  /** The user's storage counter may be off: a write of it was sent and its answer lost, or a
   * give-back failed (core/content.ts). The sweep recounts the user. */
  recount?: boolean;
}

export interface HoldChange {
  /** `<at, 13 digits>-<random>`: ordered by time, so the `_id` index is the time index and
   * a round pages through the log by `_id` alone. */
  _id: string;
  multihash: string;
  cid: string;
  /** When the change was announced (the writer's clock, ms). */
  at: number;
  /** CountedIn, when the change moves a user's counters. */
  userId?: string;
  folders?: string[];
  recount?: boolean;
  /** The process that logged the change, when it beats: if it dies before the request settles,
   * the sweep recounts the user (infra/db/processes.ts). */
  by?: string;
}

interface Watermark {
  _id: string;
  /** Every change stamped at or before this was checked. */
  at: number;
}

const changeSchema = new Schema<HoldChange>(
  {
    _id: { type: String, required: true },
    multihash: { type: String, required: true },
    cid: { type: String, required: true },
    at: { type: Number, required: true },
    userId: { type: String },
    folders: { type: [String], default: undefined },
    recount: { type: Boolean },
    by: { type: String },
  },
  { versionKey: false },
);

const watermarkSchema = new Schema<Watermark>(
  { _id: { type: String, required: true }, at: { type: Number, required: true } },
  { versionKey: false },
);

/** The `_id` bound of the changes stamped before `at` (an `_id` starts with its time). */
const idAt = (at: number) => String(Math.max(0, Math.floor(at))).padStart(13, '0');

const WATERMARK_ID = 'hold-changes';

/** `self`: the id of this process while it beats (infra/db/processes.ts). */
export function createHoldChangeStore(conn: Connection, self: () => string | undefined) {
  const Changes: Model<HoldChange> = conn.model<HoldChange>('HoldChange', changeSchema, 'hold_changes');
  const Watermarks: Model<Watermark> = conn.model<Watermark>('SweepWatermark', watermarkSchema, 'sweep_state');
  // Appends that arrive together are one insert (batch.ts): under load the log costs one write
  // per batch, not one per change.
  const appendBatched = groupCommit(async (entries: Omit<HoldChange, '_id' | 'at'>[]) => {
    const at = Date.now();
    const docs = entries.map((e) => ({ _id: `${idAt(at)}-${crypto.randomBytes(6).toString('hex')}`, ...e, at }));
    await Changes.insertMany(docs, { ordered: false, lean: true });
    return entries.map(() => undefined);
  });

  return {
    model: Changes,

    /** Records that the holds of this content changed (and whose counters the change moves);
     * resolves once the entry is stored. */
    append(multihash: string, cid: string, counted?: CountedIn): Promise<void> {
      if (!counted) return appendBatched({ multihash, cid });
      const folders = (counted.folders ?? []).filter((f): f is string => typeof f === 'string');
      const by = self();
      return appendBatched({
        multihash,
        cid,
        userId: counted.userId,
        ...(folders.length > 0 ? { folders } : {}),
        ...(counted.recount ? { recount: true } : {}),
        ...(by ? { by } : {}),
      });
    },

    /** Changes stamped after `after` and at or before `upTo`, oldest first, a page at a time
     * (`afterId`: the previous page's last `_id`). */
    page(after: number, upTo: number, limit: number, afterId?: string): Promise<HoldChange[]> {
      // Every id of a stamp `t` lies between idAt(t) and idAt(t + 1), so these are the bounds.
      const from = afterId ?? idAt(after + 1);
      return Changes.find({ _id: { [afterId ? '$gt' : '$gte']: from, $lt: idAt(upTo + 1) } })
        .sort({ _id: 1 })
        .limit(limit)
        .lean<HoldChange[]>()
        .exec();
    },

    /** Where the last round stopped; 0 before the first. */
    async watermark(): Promise<number> {
      return (await Watermarks.findById(WATERMARK_ID).lean<Watermark>().exec())?.at ?? 0;
    },

    /** Moves the watermark forward (never back: a slower, older round cannot undo a newer one). */
    async advance(at: number): Promise<void> {
      await Watermarks.updateOne({ _id: WATERMARK_ID }, { $max: { at } }, { upsert: true }).exec();
    },

    /** Deletes changes stamped before `at`. */
    async deleteBefore(at: number): Promise<number> {
      return (await Changes.deleteMany({ _id: { $lt: idAt(at) } }).exec()).deletedCount;
    },
  };
}

export type HoldChangeStore = ReturnType<typeof createHoldChangeStore>;
