// The log of hold changes: the sweep's input. Every change to a record that holds content is
// appended here before its sync signal is sent (infra/hold-sync.ts), so a signal lost while
// Temporal is down is still on record, and the sweep (activities/holds.ts) checks only the
// content that changed since its watermark instead of every held CID and every Cluster pin.
import crypto from 'node:crypto';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';

export interface HoldChange {
  /** `<at, 13 digits>-<random>`: ordered by time, so the `_id` index is the time index and
   * a round pages through the log by `_id` alone. */
  _id: string;
  multihash: string;
  cid: string;
  /** When the change was announced (the writer's clock, ms). */
  at: number;
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

export function createHoldChangeStore(conn: Connection) {
  const Changes: Model<HoldChange> = conn.model<HoldChange>('HoldChange', changeSchema, 'hold_changes');
  const Watermarks: Model<Watermark> = conn.model<Watermark>('SweepWatermark', watermarkSchema, 'sweep_state');

  return {
    model: Changes,

    /** Records that the holds of this content changed. */
    async append(multihash: string, cid: string): Promise<void> {
      const at = Date.now();
      await Changes.create({ _id: `${idAt(at)}-${crypto.randomBytes(6).toString('hex')}`, multihash, cid, at });
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
