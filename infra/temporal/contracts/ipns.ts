// Contract of an IPNS name's job (workflows/ipns.ts): one long-lived workflow per name,
// `ipns:<ipnsName>`, started when the name is made. It republishes the name's current record
// (as MongoDB has it; the API publishes) on a timer, and ends when the name is deleted. Operators pause, resume and trigger it with signals and read it with
// the `status` query (docs/operations/running.md).
import type { JobContract } from './job.js';

export interface IpnsInput {
  userId: string;
  ipnsName: string;
  /** How often the current record is signed and stored again (IPNS_REPUBLISH_INTERVAL). */
  republishEveryMs: number;
  /** Carried over a continue-as-new. */
  carried?: IpnsJobStatus;
}

export interface IpnsJobStatus {
  paused: boolean;
  /** When the timer next republishes (null while paused). */
  nextRepublishAt: number | null;
  lastRepublishAt: number | null;
  /** Set while republishing fails, from the first failure. */
  failingSince: number | null;
  republishes: number;
}

export type IpnsNameWorkflow = (input: IpnsInput) => Promise<void>;

/** A republish that failed is tried again this soon (or at the interval, if sooner). */
export const REPUBLISH_RETRY_MS = 60_000;
/** A name's job continues as new after this many republishes, keeping its history short. */
export const REPUBLISHES_PER_RUN = 50;

/** Signals, no arguments. */
export const REPUBLISH_SIGNAL = 'republish';
export const PAUSE_SIGNAL = 'pause';
export const RESUME_SIGNAL = 'resume';
export const DELETE_SIGNAL = 'delete';
/** Query → IpnsJobStatus. */
export const STATUS_QUERY = 'status';

export const ipnsJob: JobContract<IpnsInput, { ipnsName: string }> = {
  workflowType: 'ipnsNameWorkflow',
  taskQueue: (base) => base,
  workflowId: ({ ipnsName }) => `ipns:${ipnsName}`,
  searchAttributes: ({ userId, ipnsName }) => ({ UserId: userId, IpnsName: ipnsName }),
};
