// Migration 2: deliveries from before their IDs were derived from webhook and event had a
// unique (webhookId, eventId) index; `_id` does its job now (webhooks.ts), and the index only
// costs every insert. It was dropped at every start before migrations were recorded; this is
// that drop, once. Written today it would wait for a later release: the release before relies
// on that index to record an event once.
import type { Database } from '../index.js';
import type { Migration } from './migration.js';

const OLD_EVENT_INDEX = 'webhookId_1_eventId_1';

export const webhookEventIndex: Migration<Database> = {
  id: 2,
  name: 'webhook-event-index',
  migrate: async () => 0,
  async contract(db) {
    await db.webhooks.deliveryModel.collection.dropIndex(OLD_EVENT_INDEX).catch(() => undefined);
  },
};
