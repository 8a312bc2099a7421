// The audit's last report (contracts/audit.ts): one document, replaced by each run, read by
// /metrics on each scrape and by `npm run admin -- check --last`.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import type { AuditReport } from '../temporal/contracts/audit.js';

interface AuditRecord {
  _id: string;
  report: AuditReport;
}

const schema = new Schema<AuditRecord>(
  { _id: { type: String, required: true }, report: { type: Schema.Types.Mixed } },
  { versionKey: false },
);

const LAST = 'last';

export function createAuditStore(conn: Connection) {
  const Audits: Model<AuditRecord> = conn.model<AuditRecord>('Audit', schema, 'audits');
  return {
    async record(report: AuditReport): Promise<void> {
      await Audits.updateOne({ _id: LAST }, { $set: { report } }, { upsert: true }).exec();
    },
    async last(): Promise<AuditReport | null> {
      return (await Audits.findById(LAST).lean<AuditRecord>().exec())?.report ?? null;
    },
  };
}

export type AuditStore = ReturnType<typeof createAuditStore>;
