// Activities: every side effect of the workflows, built by one factory from the components
// the worker owns (temporalio/samples-typescript style). Workflows import only the *type*
// of what this returns.
import type { ActivityDeps } from './deps.js';
import { createAuditActivities } from './audit/index.js';
import { createHoldActivities } from './holds.js';
import { createIpnsActivities } from './ipns.js';
import { createMultipartActivities } from './multipart.js';
import { createPinActivities } from './pins.js';
import { createSnapshotActivities } from './snapshots.js';
import { createWebhookActivities } from './webhooks.js';

export function createActivities(deps: ActivityDeps) {
  return {
    ...createPinActivities(deps),
    ...createHoldActivities(deps),
    ...createSnapshotActivities(deps),
    ...createIpnsActivities(deps),
    ...createMultipartActivities(deps),
    ...createAuditActivities(deps),
    ...createWebhookActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
