// The workflows the worker registers. Deterministic code: imports only
// @temporalio/workflow and the *types* of the activities.
export {};
