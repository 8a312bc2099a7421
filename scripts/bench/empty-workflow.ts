// The workflow that does nothing: its executions per second are Temporal's own cost (start,
// one workflow task, completion) on this machine, the floor the pin benchmark is compared with.
export async function emptyWorkflow(): Promise<void> {}
