// The workflows the worker registers, each under its contract's `workflowType`
// (infra/temporal/contracts/). Deterministic code: imports only @temporalio/workflow, the
// contracts and the *types* of the activities.
export { pinWorkflow } from './pins.js';
export { syncCidWorkflow } from './holds.js';
export { snapshotWorkflow } from './snapshots.js';
export { sweepWorkflow } from './sweep.js';
export { ipnsNameWorkflow } from './ipns.js';
export { multipartWorkflow, multipartCleanupWorkflow } from './multipart.js';
export { auditWorkflow } from './audit.js';
export { webhookWorkflow } from './webhooks.js';
