// The documents of storage counting (usage.ts has the rules; usage-batch.ts writes them in
// batches): one per user, one per user and content held.

export interface UsageRecord {
  /** The userId. */
  _id: string;
  /** Bytes of the distinct content held by the user's file records and S3 objects. */
  files: number;
  /** Bytes of the distinct content held by the user's pinned pin requests. */
  pinned: number;
  /** Bytes of the distinct content the user holds either way: what the quota limits. */
  used: number;
  /** Counted over distinct content, with holding documents (absent: to be rebuilt). */
  distinct?: boolean;
}

/** The kinds of record counted: files, pinned pin requests, S3 objects (counted with files as stored content). */
export type HoldKind = 'file' | 'pin' | 'object';

export interface HoldRecord {
  /** `<userId>:<multihash>`. */
  _id: string;
  userId: string;
  file: number;
  pin: number;
  /** S3 objects of the content (absent on documents from before S3: 0). */
  object?: number;
  size: number;
  /** Steps whose change of the user's counters is not written yet (see `step`): above 0 once
   * writes settle, a process died between the two documents. */
  settling?: number;
}

/** A change of the counters; `used` defaults to files + pinned (content held one way only). */
export interface UsageChange {
  files?: number;
  pinned?: number;
  used?: number;
}

export type Weight = Required<UsageChange>;

/**
 * What a reservation counted ahead of its holding step (usage.ts `reserve`): `used`, and for a
 * whole new file or object its `files` too, so that the step that finds the content new has no
 * counter left to write.
 */
export interface Reserved {
  used: number;
  files: number;
}

export const NOTHING_RESERVED: Reserved = { used: 0, files: 0 };

/** What a holding document counts. */
export function weigh(doc: Partial<HoldRecord> | null | undefined): Weight {
  const size = doc?.size ?? 0;
  // An object holds content as a file does: stored through the service.
  const file = (doc?.file ?? 0) > 0 || (doc?.object ?? 0) > 0;
  const pin = (doc?.pin ?? 0) > 0;
  return { files: file ? size : 0, pinned: pin ? size : 0, used: file || pin ? size : 0 };
}

export const difference = (after: Weight, before: Weight): Weight => ({
  files: after.files - before.files,
  pinned: after.pinned - before.pinned,
  used: after.used - before.used,
});

/** The holding document after `step` records of `kind` (and `size`) change it. */
export const stepped = (before: Partial<HoldRecord> | null, kind: HoldKind, step: number, size: number): Partial<HoldRecord> => ({
  file: (before?.file ?? 0) + (kind === 'file' ? step : 0),
  pin: (before?.pin ?? 0) + (kind === 'pin' ? step : 0),
  object: (before?.object ?? 0) + (kind === 'object' ? step : 0),
  size: Math.max(before?.size ?? 0, size),
});

/** What a first holder of `kind` (of `size` bytes) adds to the counters. */
export const firstHold = (kind: HoldKind, size: number): Weight => difference(weigh(stepped(null, kind, 1, size)), weigh(null));

/** What a holding step's change leaves for the counters once its reservation counted its part. */
export const lessReserved = (change: Weight, reserved: Reserved): Weight => ({
  files: change.files - reserved.files,
  pinned: change.pinned,
  used: change.used - reserved.used,
});
