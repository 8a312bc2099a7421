// The webhook surface's mapping: what a delivery's body is. One shape for every event, as
// Standard Webhooks suggests: `{type, timestamp, data}`, where `data` is the resource as the
// REST API shows it (the same view functions), rendered when the delivery is sent from what the
// event recorded. The body is the same on every attempt of a delivery.
import type { DeliveryRecord } from '../infra/db/webhooks.js';
import type { FileRecord } from './files.js';
import type { PinRecord } from './pins.js';
import type { SnapshotRecord } from '../infra/db/snapshots.js';
import { restFile, restPin, restSnapshot } from './views.js';

/** What each event type records (core/webhook-events.ts), as the emitters write it. */
export interface EventRecords {
  pin: { pin: PinRecord };
  file: { file: FileRecord; gatewayUrl: string };
  snapshot: { folderId: string; snapshot: SnapshotRecord };
}

function data(type: string, recorded: Record<string, unknown>): Record<string, unknown> {
  switch (type) {
    case 'pin.queued':
    case 'pin.pinned':
    case 'pin.failed':
      return restPin((recorded as unknown as EventRecords['pin']).pin);
    case 'upload.created':
    case 'file.deleted': {
      const { file, gatewayUrl } = recorded as unknown as EventRecords['file'];
      return restFile(file, gatewayUrl);
    }
    case 'snapshot.completed': {
      const { folderId, snapshot } = recorded as unknown as EventRecords['snapshot'];
      return { folderId, ...restSnapshot(snapshot) };
    }
    // The others record their data as the API shows it already.
    default:
      return recorded;
  }
}

export function webhookBody(delivery: Pick<DeliveryRecord, 'type' | 'occurredAt' | 'data'>): string {
  return JSON.stringify({
    type: delivery.type,
    timestamp: new Date(delivery.occurredAt).toISOString(),
    data: data(delivery.type, delivery.data),
  });
}
