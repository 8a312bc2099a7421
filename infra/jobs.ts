// Starting and signalling the workflows, from the API and from activities. Workflow IDs are
// business IDs, and every workflow carries the Keyword search attributes Cid and UserId, so
// the Temporal UI finds any job with `Cid="bafy…"` or `UserId="usr_…"`.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { pinWorkflow, PinInput } from '../workflows/pin.js';
import type { SyncChange, syncCidWorkflow } from '../workflows/sync-cid.js';
import type { HolderRef } from './db/holds.js';
import type { PinRecord } from './db/pins.js';

export const CID_ATTRIBUTE = defineSearchAttributeKey('Cid', SearchAttributeType.KEYWORD);
export const USER_ATTRIBUTE = defineSearchAttributeKey('UserId', SearchAttributeType.KEYWORD);

export const pinWorkflowId = (cid: string, userId: string) => `pin:${cid}:${userId}`;
export const syncWorkflowId = (multihash: string) => `sync:${multihash}`;

export interface Jobs {
  /**
   * Tells the content's sync workflow that its holds changed (starting it if needed). `added`:
   * the change was this record's insert, so checking that one record is enough; without it,
   * a hold may have gone and the workflow reads them all.
   */
  requestSync(multihash: string, cid: string, added?: HolderRef): Promise<void>;
  /**
   * Starts the pin request's workflow. `fresh`: a new request, which replaces a workflow of
   * an earlier, deleted request with the same ID; otherwise an existing run is kept (so
   * asking again for a request that is still queued is harmless).
   */
  startPin(pin: PinRecord, fresh: boolean): Promise<void>;
  /** Stops a pin request's workflow, if it runs. */
  cancelPin(cid: string, userId: string): Promise<void>;
}

export function createJobs(client: Client, taskQueue: string): Jobs {
  return {
    async requestSync(multihash, cid, added) {
      const searchAttributes: SearchAttributePair[] = [{ key: CID_ATTRIBUTE, value: cid }];
      const change: SyncChange = added ? { added } : {};
      await client.workflow.signalWithStart<typeof syncCidWorkflow, [SyncChange]>('syncCidWorkflow', {
        workflowId: syncWorkflowId(multihash),
        taskQueue,
        args: [{ multihash, cid }],
        signal: 'changed',
        signalArgs: [change],
        typedSearchAttributes: searchAttributes,
      });
    },

    async startPin(pin, fresh) {
      const input: PinInput = {
        key: pin._id,
        requestId: pin.requestId,
        userId: pin.userId,
        cid: pin.cid,
        multihash: pin.multihash,
        origins: pin.origins,
        deadline: pin.deadline,
      };
      await client.workflow.start<typeof pinWorkflow>('pinWorkflow', {
        workflowId: pinWorkflowId(input.cid, input.userId),
        taskQueue,
        args: [input],
        workflowIdConflictPolicy: fresh ? 'TERMINATE_EXISTING' : 'USE_EXISTING',
        typedSearchAttributes: [
          { key: CID_ATTRIBUTE, value: input.cid },
          { key: USER_ATTRIBUTE, value: input.userId },
        ],
      });
    },

    async cancelPin(cid, userId) {
      try {
        await client.workflow.getHandle(pinWorkflowId(cid, userId)).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    },
  };
}
