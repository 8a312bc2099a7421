// What every workflow contract has, and the client that starts workflows by their contract.
//
// A contract is the one place where a workflow's name, business ID, task queue, input,
// signals and search attributes are written. The workflow, the worker and the code that
// starts it all import it, so none of them repeats a string. Contracts import nothing but
// each other's types: the workflow sandbox may load them, and infra/ never imports workflows/.

/** The Keyword search attributes the service sets; the local stack registers each of them. */
export const SEARCH_ATTRIBUTES = ['Cid', 'UserId', 'FolderId', 'IpnsName', 'WebhookId'] as const;
export type SearchAttributeName = (typeof SEARCH_ATTRIBUTES)[number];

export interface JobContract<Input extends Key, Key = Input> {
  /** The workflow function's exported name, as the worker registers it. */
  workflowType: string;
  /** The task queue, given the deployment's base queue (TEMPORAL_TASK_QUEUE). */
  taskQueue(base: string): string;
  /** The business workflow ID: one execution per ID, so a second start finds the first. */
  workflowId(key: Key): string;
  /** What the Temporal UI finds the job by, e.g. `Cid="bafy…"`. */
  searchAttributes(input: Input): Partial<Record<SearchAttributeName, string>>;
}

/** Starts and signals workflows by their contracts (infra/temporal/jobs.ts implements it). */
export interface Jobs {
  /**
   * Starts the job for `input`. `replace`: a run under the same ID is terminated and a new one
   * started (a new request that reuses a deleted one's ID); otherwise a running one is kept.
   */
  start<K, I extends K>(job: JobContract<I, K>, input: I, options?: { replace?: boolean }): Promise<void>;
  /** Sends `signal` to the job for `input`, starting it first if it does not run. */
  signalWithStart<K, I extends K, A extends unknown[]>(job: JobContract<I, K>, input: I, signal: string, args: A): Promise<void>;
  /** Cancels the job with this key, if it runs. */
  cancel<K, I extends K>(job: JobContract<I, K>, key: K): Promise<void>;
  /** Sends `signal` to the running job with this key. */
  signal<K, I extends K, A extends unknown[]>(job: JobContract<I, K>, key: K, signal: string, args: A): Promise<void>;
  /** The job's latest run: running, its result once completed, or none (never started, or
   * failed, cancelled or terminated: a job to start again). */
  state<K, I extends K>(job: JobContract<I, K>, key: K): Promise<JobState>;
  /** Asks the running job a query. */
  query<K, I extends K, R>(job: JobContract<I, K>, key: K, query: string): Promise<R>;
  /** The IDs of the job's running workflows on this deployment's task queue, page by page as
   * Temporal's visibility store answers them. */
  running<K, I extends K>(job: JobContract<I, K>): AsyncIterable<string>;
}

export type JobState = { state: 'running' } | { state: 'completed'; result: unknown } | { state: 'none' };
