// The listing a snapshot job was asked for, kept while the job runs. Asking for a snapshot
// lists the folder's tree anyway (its digest names the job); keeping that listing saves the
// job listing it again: reading 10,000 file records took 0.7 s, this one record 10 ms.
// A listing is content-addressed (its job's key holds its digest), so whatever a job reads
// under its key is the listing it was asked for. Stored deflated, one record per job.
import zlib from 'node:zlib';
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { SNAPSHOT_LISTING_MAX_BYTES, SNAPSHOT_LISTING_TTL_MS } from '../constants.js';
import type { TreeListing } from './folder-tree.js';

interface ListingRecord {
  /** The job's key: `<folderId>:<digest>`. */
  _id: string;
  folderId: string;
  /** TreeListing as JSON, deflated. */
  data: Buffer;
  createdAt: number;
}

const schema = new Schema<ListingRecord>(
  {
    _id: { type: String, required: true },
    folderId: { type: String, required: true },
    data: { type: Buffer, required: true },
    createdAt: { type: Number, required: true },
  },
  { versionKey: false },
);
schema.index({ folderId: 1, createdAt: 1 });

export const listingKey = (folderId: string, digest: string) => `${folderId}:${digest}`;

export function createSnapshotListingStore(conn: Connection) {
  const Listings: Model<ListingRecord> = conn.model<ListingRecord>('SnapshotListing', schema, 'snapshot_listings');
  return {
    model: Listings,

    /**
     * Keeps the listing for its job; false when it is too large to keep (the job lists the
     * folder itself then). Listings of the folder older than a day go: a job reads its
     * listing as it starts, so those belong to asks whose job never started.
     */
    async save(folderId: string, listing: TreeListing): Promise<boolean> {
      const data = zlib.deflateRawSync(JSON.stringify(listing), { level: 1 });
      const now = Date.now();
      await Listings.deleteMany({ folderId, createdAt: { $lt: now - SNAPSHOT_LISTING_TTL_MS } }).exec();
      if (data.length > SNAPSHOT_LISTING_MAX_BYTES) return false;
      const _id = listingKey(folderId, listing.digest);
      await Listings.replaceOne({ _id }, { _id, folderId, data, createdAt: now }, { upsert: true }).exec();
      return true;
    },

    async get(folderId: string, digest: string): Promise<TreeListing | null> {
      const record = await Listings.findById(listingKey(folderId, digest)).lean<ListingRecord>().exec();
      if (!record) return null;
      // lean() gives BSON's Binary for a Buffer field.
      const bytes = Buffer.isBuffer(record.data) ? record.data : Buffer.from((record.data as { buffer: Uint8Array }).buffer);
      return JSON.parse(zlib.inflateRawSync(bytes).toString('utf8')) as TreeListing;
    },

    async drop(folderId: string, digest: string): Promise<void> {
      await Listings.deleteOne({ _id: listingKey(folderId, digest) }).exec();
    },
  };
}

export type SnapshotListingStore = ReturnType<typeof createSnapshotListingStore>;
