// Who holds a piece of content, derived from the records themselves: a pin request that has
// not failed, or a file (later also snapshots and bucket objects), of that multihash. There
// is no separate hold document or counter to keep in step with them.
//
// Why derived: every change is then the insert or delete (or status change) of the record
// itself, and the per-CID sync workflow (workflows/sync-cid.ts), signalled after each change,
// reads the holds fresh and makes IPFS Cluster match. A separate hold written beside the
// record can be left behind when a request and a delete interleave, and FerretDB 1.24 cannot
// keep a counter or holder array in one document: its updates are a read followed by a write
// with no lock between them, so concurrent `$inc`, `$addToSet` or `$pull` lose changes
// (measured here: 200 concurrent `$inc` on one document counted 13).
import type { FileStore } from './files.js';
import type { PinStore } from './pins.js';

/** One record that holds content, by its `_id`: what a sync request names when a hold was added. */
export interface HolderRef {
  kind: 'pin' | 'file';
  key: string;
}

export interface Holds {
  /** Holders of the content, e.g. `pin:<requestId>`, `file:<fileId>`. */
  holders: string[];
  /** A CID to pin it by (the first record's), when held. */
  cid?: string;
  /** Origins of the pin requests holding it, for Cluster. */
  origins: string[];
}

export function createHoldQueries(pins: PinStore, files: FileStore) {
  const holding = { status: { $ne: 'failed' as const } };
  return {
    /**
     * Every holder of the content. It reads whole collections on FerretDB (by-id.ts), so only
     * decisions to unpin use it; adding a hold is checked with `holds`.
     */
    async of(multihash: string): Promise<Holds> {
      const [p, f] = await Promise.all([
        pins.model
          .find({ multihash, ...holding }, { requestId: 1, cid: 1, origins: 1 })
          .lean()
          .exec(),
        files.model.find({ multihash }, { cid: 1 }).lean().exec(),
      ]);
      return {
        holders: [...p.map((r) => `pin:${r.requestId}`), ...f.map((r) => `file:${r._id}`)],
        cid: p[0]?.cid ?? f[0]?.cid,
        origins: [...new Set(p.flatMap((r) => r.origins ?? []))],
      };
    },

    /** Whether this record exists and holds its content (a pin request that has not failed). */
    async holds(ref: HolderRef): Promise<{ cid: string; origins: string[] } | null> {
      if (ref.kind === 'pin') {
        const pin = await pins.get(ref.key);
        return pin && pin.status !== 'failed' ? { cid: pin.cid, origins: pin.origins } : null;
      }
      const file = await files.model.findById(ref.key, { cid: 1 }).lean().exec();
      return file ? { cid: file.cid, origins: [] } : null;
    },

    /** Every held multihash with a CID to pin it by (for the sweep). */
    async heldContent(): Promise<Map<string, string>> {
      const [p, f] = await Promise.all([
        pins.model.find(holding, { multihash: 1, cid: 1 }).lean().exec(),
        files.model.find({}, { multihash: 1, cid: 1 }).lean().exec(),
      ]);
      return new Map([...p, ...f].map((r) => [r.multihash, r.cid]));
    },
  };
}

export type HoldQueries = ReturnType<typeof createHoldQueries>;
