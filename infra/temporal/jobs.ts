// Starting, signalling and cancelling workflows by their contracts (contracts/job.ts), from
// the API and from activities. Every job carries its contract's Keyword search attributes, so
// the Temporal UI finds it with `Cid="bafy…"` or `UserId="usr_…"`.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { JobContract, Jobs, JobState } from './contracts/job.js';

export type { Jobs };

function searchAttributes<K, I extends K>(job: JobContract<I, K>, input: I): SearchAttributePair[] {
  return Object.entries(job.searchAttributes(input)).map(([name, value]) => ({
    key: defineSearchAttributeKey(name, SearchAttributeType.KEYWORD),
    value: value!,
  }));
}

export function createJobs(client: Client, baseQueue: string): Jobs {
  return {
    async start(job, input, options = {}) {
      await client.workflow.start(job.workflowType, {
        workflowId: job.workflowId(input),
        taskQueue: job.taskQueue(baseQueue),
        args: [input],
        workflowIdConflictPolicy: options.replace ? 'TERMINATE_EXISTING' : 'USE_EXISTING',
        typedSearchAttributes: searchAttributes(job, input),
      });
    },

    async signalWithStart(job, input, signal, args) {
      await client.workflow.signalWithStart<Workflow, unknown[]>(job.workflowType, {
        workflowId: job.workflowId(input),
        taskQueue: job.taskQueue(baseQueue),
        args: [input],
        signal,
        signalArgs: args,
        typedSearchAttributes: searchAttributes(job, input),
      });
    },

    async cancel(job, key) {
      try {
        await client.workflow.getHandle(job.workflowId(key)).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    },

    async signal(job, key, signal, args) {
      await client.workflow.getHandle(job.workflowId(key)).signal(signal, ...args);
    },

    async state(job, key): Promise<JobState> {
      const handle = client.workflow.getHandle(job.workflowId(key));
      let status: string;
      try {
        status = (await handle.describe()).status.name;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return { state: 'none' };
        throw err;
      }
      if (status === 'RUNNING' || status === 'CONTINUED_AS_NEW') return { state: 'running' };
      if (status === 'COMPLETED') return { state: 'completed', result: await handle.result() };
      return { state: 'none' };
    },

    query(job, key, query) {
      return client.workflow.getHandle(job.workflowId(key)).query(query);
    },

    async *running(job) {
      const query = `WorkflowType="${job.workflowType}" AND ExecutionStatus="Running" AND TaskQueue="${job.taskQueue(baseQueue)}"`;
      for await (const execution of client.workflow.list({ query, pageSize: 1000 })) yield execution.workflowId;
    },
  };
}
