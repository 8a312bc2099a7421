// The workflows the worker registers. Deterministic code: imports only
// @temporalio/workflow and the *types* of the activities.
export { pinWorkflow } from './pin.js';
export { syncCidWorkflow, changedSignal } from './sync-cid.js';
export { sweepWorkflow } from './sweep.js';
