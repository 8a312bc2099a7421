// The audit's activities (contract: infra/temporal/contracts/audit.ts): three checks, each a
// long activity that heartbeats as it goes, and the keeping of each run's report.
import { Context } from '@temporalio/activity';
import type { AuditPart, AuditReport } from '../../infra/temporal/contracts/audit.js';
import type { ActivityDeps } from '../deps.js';
import { createAccountAudit } from './accounts.js';
import { createContentAudit } from './content.js';
import { createJobAudit } from './jobs.js';

/** Heartbeats while `run` works, so a dead worker is noticed and the check runs elsewhere. */
async function heartbeating<T>(run: (progress: () => void) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 2_000);
  try {
    return await run(() => ctx.heartbeat());
  } finally {
    clearInterval(beat);
  }
}

export function createAuditActivities(deps: ActivityDeps) {
  const content = createContentAudit(deps);
  const accounts = createAccountAudit(deps);
  const jobs = createJobAudit(deps);
  return {
    auditContent: (input: { repair: boolean }): Promise<AuditPart> => heartbeating((progress) => content(input.repair, progress)),
    auditAccounts: (input: { repair: boolean }): Promise<AuditPart> => heartbeating((progress) => accounts(input.repair, progress)),
    auditJobs: (input: { repair: boolean }): Promise<AuditPart> => heartbeating(() => jobs(input.repair)),
    /** Keeps the run's report: the last one is what /metrics shows. */
    async recordAudit(report: AuditReport): Promise<void> {
      await deps.db.audits.record(report);
    },
  };
}
