// Benchmark 2: pin requests per second, end to end (POST /pin until the record says
// `pinned`), against the floor Temporal itself sets on this machine: executions per second of
// a workflow that does nothing, started and awaited the same way with the same concurrency.
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import mongoose from 'mongoose';
import pLimit from 'p-limit';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createKubo } from '../../infra/ipfs/kubo.js';

export const PIN_COUNT = 1000;
export const CONCURRENCY = 50;

export interface PinsResult {
  pinsPerSecond: number;
  /** How long the 1,000 POSTs alone took (202 answers), for telling API from workflow time. */
  postSeconds: number;
  totalSeconds: number;
  /** 5xx answers to POST /pin (each retried). */
  serverErrors: number;
  /** Pin workflows the run started: the API pins content Kubo has inline (core/pins.ts). */
  workflows: number;
}

/** 1,000 distinct single-block files in the stack's Kubo, not pinned: content that is local. */
async function addLocalBlocks(kuboApiUrl: string): Promise<string[]> {
  const kubo = createKubo(kuboApiUrl);
  const run = crypto.randomBytes(8).toString('hex');
  const files = Array.from({ length: PIN_COUNT }, (_, i) => ({ content: Buffer.from(`stupa bench ${run} block ${i}\n`) }));
  const cids: string[] = [];
  for await (const added of kubo.addAll(files, { cidVersion: 1, rawLeaves: true, pin: false })) cids.push(added.cid.toString());
  if (new Set(cids).size !== PIN_COUNT) throw new Error(`expected ${PIN_COUNT} distinct CIDs from Kubo, got ${new Set(cids).size}`);
  return cids;
}

export async function benchPins(
  t: {
    kuboApiUrl: string;
    mongodbUri: string;
    temporalAddress: string;
    /** The namespace the services use ('default' unless given). */
    temporalNamespace?: string;
    /** Clients take turns among these API processes. */
    apiUrls: string[];
    apiKey: string;
    userId: string;
    say: (line: string) => void;
  },
  signal: AbortSignal,
): Promise<PinsResult & { cids: string[] }> {
  const cids = await addLocalBlocks(t.kuboApiUrl);
  // Completion is read from MongoDB's pins collection: one count per poll instead of 1,000
  // GET /pin calls, which would load the very API being measured.
  const conn = await mongoose.createConnection(t.mongodbUri, { serverSelectionTimeoutMS: 5000 }).asPromise();
  try {
    const pins = conn.collection('pins');
    const limit = pLimit(CONCURRENCY);
    let serverErrors = 0;
    t.say(`pins: ${PIN_COUNT} POST /pin, ${CONCURRENCY} at a time`);
    const start = Date.now();
    await Promise.all(
      cids.map((cid, i) =>
        limit(async () => {
          const apiUrl = t.apiUrls[i % t.apiUrls.length]!;
          // A 5xx is retried, as a client would, but counted and reported: the run still
          // measures, and the summary says the service failed requests under this load.
          for (let attempt = 1; ; attempt++) {
            signal.throwIfAborted();
            const res = await fetch(`${apiUrl}/pin`, {
              method: 'POST',
              headers: { 'Content-Type': 'application/json', 'X-Api-Key': t.apiKey },
              body: JSON.stringify({ cid }),
            });
            const text = await res.text();
            if (res.status === 202) return;
            if (res.status < 500 || attempt === 5) throw new Error(`POST /pin ${cid} answered ${res.status}: ${text.slice(0, 300)}`);
            serverErrors++;
            await new Promise((r) => setTimeout(r, 50 * attempt));
          }
        }),
      ),
    );
    const postSeconds = (Date.now() - start) / 1000;

    // Done when no request of the user is left queued or pinning: a lookup of one document in the
    // (userId, status) index each poll. Counting the pinned ones instead read every pinned
    // document, ten times a second: FerretDB spent more on the bench's polls than on the pins.
    const deadline = Date.now() + 10 * 60_000;
    const one = (status: object | string) => pins.findOne({ userId: t.userId, status }, { projection: { _id: 1 } });
    for (;;) {
      signal.throwIfAborted();
      const [waiting, failed] = await Promise.all([one({ $in: ['queued', 'pinning'] }), one('failed')]);
      if (failed) throw new Error(`pin request ${String(failed._id)} ended failed`);
      if (!waiting) break;
      if (Date.now() > deadline) {
        const pinned = await pins.countDocuments({ userId: t.userId, status: 'pinned' });
        throw new Error(`only ${pinned} of ${PIN_COUNT} pins were pinned after 10 minutes`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const pinned = await pins.countDocuments({ userId: t.userId, status: 'pinned' });
    if (pinned !== PIN_COUNT) throw new Error(`${pinned} of ${PIN_COUNT} pin requests ended pinned`);
    // The worker stamps pinnedAt (same machine, same clock): the last one ends the run exactly,
    // not at the next poll.
    const [last] = await pins.find({ userId: t.userId, status: 'pinned' }).sort({ pinnedAt: -1 }).limit(1).toArray();
    const end = typeof last?.pinnedAt === 'number' ? last.pinnedAt : Date.now();
    const totalSeconds = (end - start) / 1000;
    const workflows = await pinWorkflows(t.temporalAddress, t.temporalNamespace ?? 'default', t.userId);
    return { pinsPerSecond: PIN_COUNT / totalSeconds, postSeconds, totalSeconds, serverErrors, workflows, cids };
  } finally {
    await conn.close();
  }
}

/** How many pin workflows Temporal has for the user (its visibility store, by search attribute). */
async function pinWorkflows(temporalAddress: string, namespace: string, userId: string): Promise<number> {
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const { count } = await new Client({ connection, namespace }).workflow.count(`WorkflowType = 'pinWorkflow' AND UserId = '${userId}'`);
    return count;
  } finally {
    await connection.close();
  }
}

/**
 * 1,000 executions of emptyWorkflow on a task queue of its own, served by a Worker in this
 * process: what Temporal on this machine can do when a workflow costs nothing.
 */
export async function benchEmptyWorkflow(
  temporalAddress: string,
  signal: AbortSignal,
  namespace = 'default',
): Promise<{ perSecond: number; seconds: number }> {
  const taskQueue = `bench-empty-${crypto.randomBytes(4).toString('hex')}`;
  const nativeConnection = await NativeConnection.connect({ address: temporalAddress });
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const worker = await Worker.create({
      connection: nativeConnection,
      namespace,
      taskQueue,
      workflowsPath: fileURLToPath(new URL('./empty-workflow.ts', import.meta.url)),
    });
    const client = new Client({ connection, namespace });
    const limit = pLimit(CONCURRENCY);
    let seconds = 0;
    // runUntil shuts the worker down when the function settles, also on failure.
    await worker.runUntil(async () => {
      const start = Date.now();
      await Promise.all(
        Array.from({ length: PIN_COUNT }, (_, i) =>
          limit(() => {
            signal.throwIfAborted();
            return client.workflow.execute('emptyWorkflow', { taskQueue, workflowId: `${taskQueue}-${i}` });
          }),
        ),
      );
      seconds = (Date.now() - start) / 1000;
    });
    return { perSecond: PIN_COUNT / seconds, seconds };
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}
