// Which API processes are alive. Each beats (one small write every PROCESS_BEAT_MS), so the sweep
// can tell whether a request's process lived past the moment the request must have settled.
// That closes the last window of an exact storage counter: an upload reserves its bytes (one
// `$inc` of the user's counter) before its record is written, and a process killed between the
// two leaves a reservation that no record or holding shows. Its change was logged before the
// reservation, naming the process (`by`, infra/db/hold-changes.ts); when that process stopped
// beating before the change settled, the sweep recounts the user (activities/counts.ts). Found by
// npm run chaos (a counter 42 bytes high after an API kill). A write per request that ends would
// say the same more precisely, at a write per upload; a beat costs one write per process.
import crypto from 'node:crypto';
import os from 'node:os';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { PROCESS_BEAT_MS } from '../constants.js';

export interface ProcessBeat {
  /** Random per process start. */
  _id: string;
  kind: string;
  host: string;
  pid: number;
  startedAt: number;
  /** The last beat (the process's clock, ms). */
  beatAt: number;
  /** Set by a stop after which no request of the process was left running. */
  stoppedAt?: number;
}

const schema = new Schema<ProcessBeat>(
  {
    _id: { type: String, required: true },
    kind: { type: String, required: true },
    host: { type: String, required: true },
    pid: { type: Number, required: true },
    startedAt: { type: Number, required: true },
    beatAt: { type: Number, required: true, index: true },
    stoppedAt: { type: Number },
  },
  { versionKey: false },
);

export function createProcessStore(conn: Connection) {
  const Processes: Model<ProcessBeat> = conn.model<ProcessBeat>('Process', schema, 'processes');
  const id = crypto.randomUUID();
  let beating = false;

  const beat = async (kind: string, startedAt: number, stopped = false) => {
    const now = Date.now();
    const doc = { kind, host: os.hostname(), pid: process.pid, startedAt, beatAt: now, ...(stopped ? { stoppedAt: now } : {}) };
    await Processes.updateOne({ _id: id }, { $set: doc }, { upsert: true }).exec();
  };

  return {
    model: Processes,

    /** This process's id while it beats (what its logged changes name), else undefined. */
    self: (): string | undefined => (beating ? id : undefined),

    /**
     * Beats until the returned stop is called; resolves once the first beat is stored. A beat
     * that fails (MongoDB away) is skipped: a process that cannot beat may be taken for gone,
     * which costs a recount, never a wrong count. `stop` writes a last beat; `clean`: every
     * request of the process has ended, so none of its changes needs a recount.
     */
    async startBeating(kind: string): Promise<(options?: { clean?: boolean }) => Promise<void>> {
      const startedAt = Date.now();
      await beat(kind, startedAt);
      beating = true;
      const timer = setInterval(() => void beat(kind, startedAt).catch(() => undefined), PROCESS_BEAT_MS);
      timer.unref();
      return async (options = {}) => {
        clearInterval(timer);
        await beat(kind, startedAt, options.clean).catch(() => undefined);
        beating = false;
      };
    },

    /** When each of these processes (that is on record) was last seen alive: its last beat, or
     * for ever after a clean stop (its requests all ended). */
    async lastSeen(ids: string[]): Promise<Map<string, number>> {
      if (ids.length === 0) return new Map();
      const rows = await Processes.find({ _id: { $in: ids } }, { beatAt: 1, stoppedAt: 1 })
        .lean<Pick<ProcessBeat, '_id' | 'beatAt' | 'stoppedAt'>[]>()
        .exec();
      return new Map(rows.map((r) => [r._id, r.stoppedAt === undefined ? r.beatAt : Number.POSITIVE_INFINITY]));
    },

    /** Forgets processes that stopped beating before `at` (by the beatAt index). */
    async deleteGoneBefore(at: number): Promise<number> {
      return (await Processes.deleteMany({ beatAt: { $lt: at } }).exec()).deletedCount;
    },
  };
}

export type ProcessStore = ReturnType<typeof createProcessStore>;
