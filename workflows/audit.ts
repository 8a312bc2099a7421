// The audit (contract: infra/temporal/contracts/audit.ts): its three checks in turn, their
// findings put together, the report kept. Each check is a long activity that heartbeats; one
// that fails is retried on its own, the others' findings kept.
import { proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { AUDIT_LISTED, DISAGREEMENT_KINDS, type AuditReport, type AuditWorkflow } from '../infra/temporal/contracts/audit.js';

const checks = proxyActivities<Activities>({ startToCloseTimeout: '6h', heartbeatTimeout: '1m' });
const { recordAudit } = proxyActivities<Activities>({ startToCloseTimeout: '1m' });

export const auditWorkflow: AuditWorkflow = async (input = {}) => {
  const repair = input.repair === true;
  const startedAt = Date.now();
  const parts = [await checks.auditContent({ repair }), await checks.auditAccounts({ repair }), await checks.auditJobs({ repair })];
  const report: AuditReport = {
    startedAt,
    finishedAt: Date.now(),
    repair,
    checked: {},
    found: Object.fromEntries(DISAGREEMENT_KINDS.map((kind) => [kind, 0])) as AuditReport['found'],
    disagreements: [],
    repaired: 0,
  };
  for (const part of parts) {
    Object.assign(report.checked, part.checked);
    for (const [kind, n] of Object.entries(part.found)) report.found[kind as keyof AuditReport['found']] += n;
    report.disagreements.push(...part.disagreements.slice(0, AUDIT_LISTED - report.disagreements.length));
    report.repaired += part.repaired;
  }
  await recordAudit(report);
  return report;
};

// Versioning (infra/temporal/versioning.ts): moves to the current version at its next task
// (AUTO_UPGRADE), its changes guarded by the replay tests (tests/unit/replay.test.ts).
// A run a day from a schedule (or on demand): the new code's audit is the one wanted.
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, auditWorkflow);
