// What one check of the audit gathers: counts of what it compared, and the disagreements it
// found (every one counted, the first AUDIT_LISTED listed with their subjects).
//
// Beside traffic one side may be a moment ahead of the other (a record's pin follows its
// insert; a counter is stepped after its record is written; a workflow starts after its
// record): what differs at the first look is a suspect, looked at again AUDIT_SECOND_LOOK_MS
// later, all of a page's suspects after one wait, and reported only if it still differs.
import pLimit from 'p-limit';
import { AUDIT_CONCURRENCY, AUDIT_SECOND_LOOK_MS } from '../../infra/constants.js';
import { AUDIT_LISTED, type AuditPart, type Disagreement } from '../../infra/temporal/contracts/audit.js';

/** The second look: the disagreement if it is still there, else null. */
export type SecondLook = () => Promise<Disagreement | null>;

export function createFindings() {
  const part: AuditPart = { checked: {}, found: {}, disagreements: [], repaired: 0 };
  const suspects: SecondLook[] = [];
  const limit = pLimit(AUDIT_CONCURRENCY);
  const found = (d: Disagreement): void => {
    part.found[d.kind] = (part.found[d.kind] ?? 0) + 1;
    if (d.repaired) part.repaired++;
    if (part.disagreements.length < AUDIT_LISTED) part.disagreements.push(d);
  };
  return {
    part,
    found,
    checked(what: string, n = 1): void {
      part.checked[what] = (part.checked[what] ?? 0) + n;
    },
    suspect(secondLook: SecondLook): void {
      suspects.push(secondLook);
    },
    /** Looks again at the suspects so far, after one wait. */
    async settle(): Promise<void> {
      if (suspects.length === 0) return;
      const now = suspects.splice(0);
      await new Promise((resolve) => setTimeout(resolve, AUDIT_SECOND_LOOK_MS));
      for (const d of await Promise.all(now.map((look) => limit(look)))) if (d) found(d);
    },
  };
}

export type Findings = ReturnType<typeof createFindings>;
