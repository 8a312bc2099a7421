// Contract of the audit (workflows/audit.ts): every account and every piece of content compared
// across the places that must agree — holds in MongoDB, Cluster's pin set, Kubo's pins, the
// counters and their records, open multipart uploads and their parts in MFS, and the
// workflows that must run for live records. Scheduled (`every`), and run on demand by
// `npm run admin -- check [--repair]`; each run's report is kept (infra/db/audits.ts) and
// exposed on /metrics.
import type { JobContract } from './job.js';

/**
 * What can disagree. Each kind names the two sides and which one is missing or off:
 * - held-not-pinned: a record holds the content, Cluster has no pin of ours for it (repair:
 *   the content's sync, which pins it).
 * - pinned-not-held: Cluster pins it for us, no record holds it (repair: the sync, which unpins
 *   after reading the holds again).
 * - pinned-after-backup: the same, but the pin may be a record's that a restore of the database
 *   forgot: it was made between a backup and its restore, or says not when and a restore was
 *   made (core/restores.ts). Kept: no repair unpins it; the operator decides.
 * - cluster-not-in-kubo: Cluster pins it, the IPFS node does not have it pinned (Cluster's
 *   `error` and `unexpectedly_unpinned` states; repair: Cluster's recover).
 * - kubo-pin-unknown-to-cluster: Kubo pins it recursively, Cluster does not (left by a Cluster
 *   peer killed between dropping a pin from its state and unpinning it in Kubo; repair: unpin
 *   in Kubo when no record holds the content, the node being the service's own).
 * - storage-counter: a user's storage counters or holding documents differ from a count of
 *   their records (repair: recount the user, infra/db/usage.ts, beside their traffic).
 * - folder-file-count: a folder's fileCount differs from its files (repair: set it to the
 *   count, unless it moved since it was read).
 * - ipns-name-count: a user's names counter (the plan's limit counts it) differs from their names
 *   (repair: set it to the count, unless it moved since it was read).
 * - parts-without-upload: MFS holds parts of an upload no upload record names (repair: unlink
 *   them; an upload's record is written before its first part and removed after its parts).
 * - upload-without-parts: an open upload's part record whose bytes are gone from MFS.
 * - name-without-republish: an IPNS name with no running republish workflow (repair: start it).
 * - pin-without-job: a pinning pin request, or one queued longer than PIN_STALLED_MS, with no
 *   running pin workflow (repair: start it, as the sweep does).
 * - job-without-record: a running pin or republish workflow whose record is gone (repair of a
 *   republish workflow: signal it to end; a pin workflow's is left to the operator).
 */
export const DISAGREEMENT_KINDS = [
  'held-not-pinned',
  'pinned-not-held',
  'pinned-after-backup',
  'cluster-not-in-kubo',
  'kubo-pin-unknown-to-cluster',
  'storage-counter',
  'folder-file-count',
  'ipns-name-count',
  'parts-without-upload',
  'upload-without-parts',
  'name-without-republish',
  'pin-without-job',
  'job-without-record',
] as const;
export type DisagreementKind = (typeof DISAGREEMENT_KINDS)[number];

export interface Disagreement {
  kind: DisagreementKind;
  /** The CID, or the record's or workflow's ID, it concerns. */
  subject: string;
  userId?: string;
  /** What each side says. */
  detail: string;
  /** What --repair did about it (absent: nothing, or not asked). */
  repaired?: string;
}

export interface AuditInput {
  repair?: boolean;
}

export interface AuditReport {
  startedAt: number;
  finishedAt: number;
  repair: boolean;
  /** How many of each thing were compared: `content`, `kuboPins`, `users`, `folders`, … */
  checked: Record<string, number>;
  /** Disagreements found, per kind (every kind present, 0 when none). */
  found: Record<DisagreementKind, number>;
  /** The first AUDIT_LISTED of them, each with what it concerns. */
  disagreements: Disagreement[];
  /** How many of them --repair repaired. */
  repaired: number;
}

/** Disagreements a report lists with their subjects (the counts per kind are always whole). */
export const AUDIT_LISTED = 1000;

/** The part of a report one check returns. */
export type AuditPart = Pick<AuditReport, 'checked' | 'disagreements' | 'repaired'> & { found: Partial<Record<DisagreementKind, number>> };

export type AuditWorkflow = (input?: AuditInput) => Promise<AuditReport>;

export const auditJob: JobContract<void, void> & { scheduleId(base: string): string; every: string; onDemandId(base: string): string } = {
  workflowType: 'auditWorkflow',
  taskQueue: (base) => base,
  workflowId: () => 'audit',
  searchAttributes: () => ({}),
  scheduleId: (base) => `stupa-audit:${base}`,
  every: '6h',
  /** An audit asked for while one runs joins it. */
  onDemandId: (base) => `audit:${base}`,
};
