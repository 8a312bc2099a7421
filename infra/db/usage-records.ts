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
