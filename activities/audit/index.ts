// The audit's activities (contract: infra/temporal/contracts/audit.ts): three checks, each a
// long activity that heartbeats as it goes, and the keeping of each run's report.
import type { AuditPart, AuditReport } from '../../infra/temporal/contracts/audit.js';
import type { ActivityDeps } from '../deps.js';
import { heartbeating } from '../heartbeat.js';
import { createAccountAudit } from './accounts.js';
import { createContentAudit } from './content.js';
import { createJobAudit } from './jobs.js';

export function createAuditActivities(deps: ActivityDeps) {
  const content = createContentAudit(deps);
  const accounts = createAccountAudit(deps);
  const jobs = createJobAudit(deps);
  return {
    auditContent: (input: { repair: boolean }): Promise<AuditPart> => heartbeating((ctx) => content(input.repair, () => ctx.heartbeat())),
    auditAccounts: (input: { repair: boolean }): Promise<AuditPart> => heartbeating((ctx) => accounts(input.repair, () => ctx.heartbeat())),
    auditJobs: (input: { repair: boolean }): Promise<AuditPart> => heartbeating(() => jobs(input.repair)),
    /** Keeps the run's report: the last one is what /metrics shows. */
    async recordAudit(report: AuditReport): Promise<void> {
      await deps.db.audits.record(report);
    },
  };
}
