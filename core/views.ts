// How the service shows its resources to the outside: the REST API's answers and the webhook
// payloads (core/webhook-payload.ts), whose `data` is the resource exactly as the REST API shows
// it. One view per resource, here so that both surfaces use the same one.
import type { SnapshotRecord } from '../infra/db/snapshots.js';
import { MB } from './content.js';
import type { FileRecord } from './files.js';
import type { PinRecord } from './pins.js';

/** A file as the REST API shows it, with its links. */
export const restFile = (f: FileRecord, gatewayUrl: string) => ({
  id: f._id,
  cid: f.cid,
  name: f.name,
  description: f.description,
  size: f.size,
  sizeMB: Math.round((f.size / MB) * 1e6) / 1e6,
  mimeType: f.mimeType,
  folderId: f.folderId,
  metadata: f.metadata,
  createdAt: f.createdAt,
  updatedAt: f.updatedAt,
  uris: { ipfs: `ipfs://${f.cid}`, gateway: `${gatewayUrl}/ipfs/${f.cid}` },
});

/** A folder snapshot as the REST API shows it. */
export const restSnapshot = (s: SnapshotRecord) => ({ cid: s.cid, takenAt: s.takenAt, fileCount: s.fileCount, totalSize: s.totalSize });

/** A pin request as the REST API shows it. */
export const restPin = (p: PinRecord) => ({
  requestId: p.requestId,
  cid: p.cid,
  status: p.status,
  name: p.name,
  description: p.description,
  origins: p.origins,
  metadata: p.metadata,
  size: p.size,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt,
  pinnedAt: p.pinnedAt,
  error: p.error,
});
