// Webhooks: an account's endpoints (`webhooks`) and the deliveries of events to them
// (`webhookdeliveries`, one document per event and endpoint, with its last attempts). An
// endpoint's job (workflows/webhooks.ts) reads its pending deliveries in the order the events
// happened and sends them; a delivery is its own log entry, so the log is as long as the
// retention (WEBHOOK_LOG_RETENTION_MS), and each round of the job drops older ones.
import type { Connection, Model } from 'mongoose';
import { Schema } from 'mongoose';
import { AUTH_MEMORY_MS } from '../constants.js';
import { groupCommit, insertUnordered } from './batch.js';
import { rememberReads } from './by-id.js';
import { after } from './pages.js';

export interface WebhookRecord {
  /** `wh_…` */
  _id: string;
  userId: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  /** The signing secret (`whsec_…`) sealed under the master key: it signs every delivery. */
  secretSealed: string;
  createdAt: number;
  updatedAt: number;
  /** When the endpoint's current run of failed attempts began; null while it answers. */
  failingSince: number | null;
  /** Why the service paused it (failing for the whole retry period); null otherwise. */
  disabledReason: string | null;
}

/** An attempt to keep, and the delivery's state after it. */
export interface AttemptWrite {
  id: string;
  attempt: WebhookAttempt;
  set: Pick<DeliveryRecord, 'state' | 'nextAttemptAt' | 'firstAttemptAt'>;
}

export interface WebhookAttempt {
  at: number;
  /** The receiver's status, or null when there was no answer (refused, timed out). */
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** The first WEBHOOK_RESPONSE_KEEP_CHARS characters of the answer. */
  response: string | null;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface DeliveryRecord {
  /** `dlv_…`, derived from the endpoint and the event (core/webhook-events.ts deliveryId). */
  _id: string;
  webhookId: string;
  userId: string;
  /** The event's ID (`msg_…`), sent as `webhook-id` on every attempt. */
  eventId: string;
  type: string;
  /** What the event is about (`pin:<requestId>`): events of one subject are sent in order. */
  subject: string;
  /** The payload's `data`, as the API shows the resource (core/webhook-payload.ts). */
  data: Record<string, unknown>;
  /** When the event happened (ms), and its place among this process's events of that ms. */
  occurredAt: number;
  seq: number;
  state: DeliveryState;
  nextAttemptAt: number;
  /** The first attempt of the current try (redelivery starts a new one); null before. */
  firstAttemptAt: number | null;
  attempts: WebhookAttempt[];
  createdAt: number;
}

const webhookSchema = new Schema<WebhookRecord>(
  {
    _id: { type: String, required: true },
    userId: { type: String, required: true },
    url: { type: String, required: true },
    events: { type: [String], required: true },
    description: { type: String, default: null },
    enabled: { type: Boolean, required: true },
    secretSealed: { type: String, required: true },
    createdAt: { type: Number, required: true },
    updatedAt: { type: Number, required: true },
    failingSince: { type: Number, default: null },
    disabledReason: { type: String, default: null },
  },
  { versionKey: false, minimize: false },
);
webhookSchema.index({ userId: 1, createdAt: -1, _id: -1 });
// The endpoints an event may go to: an account's enabled ones.
webhookSchema.index({ userId: 1, enabled: 1 });

const deliverySchema = new Schema<DeliveryRecord>(
  {
    _id: { type: String, required: true },
    webhookId: { type: String, required: true },
    userId: { type: String, required: true },
    eventId: { type: String, required: true },
    type: { type: String, required: true },
    subject: { type: String, required: true },
    // Its JSON text (see `stored`); an object in deliveries recorded before.
    data: { type: Schema.Types.Mixed, required: true },
    occurredAt: { type: Number, required: true },
    seq: { type: Number, required: true },
    state: { type: String, required: true },
    nextAttemptAt: { type: Number, required: true },
    firstAttemptAt: { type: Number, default: null },
    attempts: { type: Schema.Types.Mixed, required: true },
    createdAt: { type: Number, required: true },
  },
  { versionKey: false, minimize: false },
);
// One delivery per event and endpoint comes from its `_id`, derived from both
// (core/webhook-events.ts deliveryId); the unique index that did it before is dropped by
// migration 2 (migrations/0002-webhook-event-index.ts).
// An endpoint's round: its pending deliveries in event order.
deliverySchema.index({ webhookId: 1, state: 1, seq: 1 });
// The delivery log, newest first, and its retention.
deliverySchema.index({ webhookId: 1, createdAt: -1, _id: -1 });

/**
 * A delivery as written: its `data` as JSON text. FerretDB keeps a nested document field by
 * field with each field's type beside it, and converts all of it on every insert, read and
 * rewrite; one string costs it a fraction. Measured on FerretDB alone, a delivery's life (insert
 * in batches of 8, the round's read, the attempt's update) with an upload event's data: 0.47 ms
 * of its CPU nested, 0.33-0.34 as text. Nothing queries inside `data`, and the log does not
 * show it (it is read only to send).
 */
type StoredDelivery = Omit<DeliveryRecord, 'data'> & { data: string | Record<string, unknown> };
const stored = (d: DeliveryRecord): StoredDelivery => ({ ...d, data: JSON.stringify(d.data) });
const loaded = (d: StoredDelivery): DeliveryRecord => ({
  ...d,
  data: typeof d.data === 'string' ? (JSON.parse(d.data) as Record<string, unknown>) : d.data,
});
/** The delivery log's reads: all but `data`. */
const LOGGED = { data: 0 } as const;

export function createWebhookStore(conn: Connection) {
  const Webhooks: Model<WebhookRecord> = conn.model<WebhookRecord>('Webhook', webhookSchema, 'webhooks');
  const Deliveries: Model<DeliveryRecord> = conn.model<DeliveryRecord>('WebhookDelivery', deliverySchema, 'webhookdeliveries');
  const enabled = rememberReads(
    (userId: string) =>
      Webhooks.find({ userId, enabled: true }, { _id: 1, events: 1 }).lean<Pick<WebhookRecord, '_id' | 'events'>[]>().exec(),
    AUTH_MEMORY_MS,
  );
  const insertDelivery = groupCommit((batch: StoredDelivery[]) => insertUnordered(Deliveries, batch));
  return {
    model: Webhooks,
    deliveryModel: Deliveries,

    async insert(webhook: WebhookRecord): Promise<void> {
      await Webhooks.create(webhook);
      enabled.forget(webhook.userId);
    },

    byId: (id: string) => Webhooks.findById(id).lean<WebhookRecord>().exec(),

    /** The user's endpoint; null when there is none, or it is another user's. */
    get: (userId: string, id: string) => Webhooks.findOne({ _id: id, userId }).lean<WebhookRecord>().exec(),

    page: (userId: string, limit: number, last?: { at: number; id: string }) =>
      Webhooks.find({ userId, ...(last ? after('createdAt', last) : {}) })
        .sort({ createdAt: -1, _id: -1 })
        .limit(limit)
        .lean<WebhookRecord[]>()
        .exec(),

    /**
     * The user's enabled endpoints that take events of `type` (at most the plan's number of
     * them), from the user's enabled endpoints as this process read them within AUTH_MEMORY_MS
     * (an event per upload would otherwise cost a read each). A change made in this process
     * counts at once (`insert`, `update` and `remove` forget them), one made in another within
     * that second, as for users (core/access.ts).
     */
    async subscribed(userId: string, type: string): Promise<{ _id: string }[]> {
      return ((await enabled.get(userId)) ?? []).filter((w) => w.events.includes(type));
    },

    async update(
      userId: string,
      id: string,
      set: Partial<Pick<WebhookRecord, 'url' | 'events' | 'description' | 'enabled' | 'disabledReason'>>,
    ): Promise<WebhookRecord | null> {
      const updated = await Webhooks.findOneAndUpdate(
        { _id: id, userId },
        { $set: { ...set, updatedAt: Date.now() } },
        { returnDocument: 'after' },
      )
        .lean<WebhookRecord>()
        .exec();
      enabled.forget(userId);
      return updated;
    },

    /** Removes the endpoint and its delivery log; true when it was the user's. */
    async remove(userId: string, id: string): Promise<boolean> {
      const res = await Webhooks.deleteOne({ _id: id, userId }).exec();
      enabled.forget(userId);
      if (res.deletedCount === 0) return false;
      await Deliveries.deleteMany({ webhookId: id }).exec();
      return true;
    },

    /** A failed attempt: the endpoint is failing since `at`, unless it was already. */
    async failing(id: string, at: number): Promise<void> {
      await Webhooks.updateOne({ _id: id, failingSince: null }, { $set: { failingSince: at } }).exec();
    },

    /** A delivered attempt: the endpoint answers again. */
    async answering(id: string): Promise<void> {
      await Webhooks.updateOne({ _id: id, failingSince: { $ne: null } }, { $set: { failingSince: null } }).exec();
    },

    /** Pauses an endpoint that failed for the whole retry period; true when this call did. */
    async disable(id: string, reason: string): Promise<boolean> {
      const res = await Webhooks.updateOne(
        { _id: id, enabled: true },
        { $set: { enabled: false, disabledReason: reason, failingSince: null, updatedAt: Date.now() } },
      ).exec();
      return res.modifiedCount === 1;
    },

    /** Records deliveries; those recorded already (the same event for the same endpoint) are
     * skipped. The deliveries of events recorded together (concurrent uploads) share one insert. */
    async addDeliveries(deliveries: DeliveryRecord[]): Promise<void> {
      await Promise.all(deliveries.map((d) => insertDelivery(stored(d))));
    },

    /** The endpoint's pending deliveries in event order, due or not. */
    async pending(webhookId: string, limit: number): Promise<DeliveryRecord[]> {
      const rows = await Deliveries.find({ webhookId, state: 'pending' }).sort({ seq: 1 }).limit(limit).lean<StoredDelivery[]>().exec();
      return rows.map(loaded);
    },

    /** The endpoint's delivery log, newest first, without the events' data. */
    deliveries: (userId: string, webhookId: string, limit: number, last?: { at: number; id: string }) =>
      Deliveries.find({ webhookId, userId, ...(last ? after('createdAt', last) : {}) }, LOGGED)
        .sort({ createdAt: -1, _id: -1 })
        .limit(limit)
        .lean<Omit<DeliveryRecord, 'data'>[]>()
        .exec(),

    /** Keeps attempts (the last `keep` of each delivery's) and the deliveries' new states, in one write. */
    async attempted(writes: AttemptWrite[], keep: number): Promise<void> {
      if (writes.length === 0) return;
      await Deliveries.bulkWrite(
        writes.map(({ id, attempt, set }) => ({
          updateOne: { filter: { _id: id }, update: { $set: set, $push: { attempts: { $each: [attempt], $slice: -keep } } } },
        })),
        { ordered: false },
      );
    },

    /** Sends the delivery again, as a new try with the same event ID (not a notice: never sent). */
    redeliver: (userId: string, webhookId: string, id: string) =>
      Deliveries.findOneAndUpdate(
        { _id: id, webhookId, userId, type: { $ne: 'webhook.disabled' } },
        { $set: { state: 'pending', nextAttemptAt: Date.now(), firstAttemptAt: null } },
        // FerretDB 1.24's findAndModify refuses a projection: the whole record comes back.
        { returnDocument: 'after' },
      )
        .lean<Omit<DeliveryRecord, 'data'>>()
        .exec(),

    /** Drops the endpoint's finished deliveries recorded before `before`. */
    async prune(webhookId: string, before: number): Promise<void> {
      await Deliveries.deleteMany({ webhookId, state: { $ne: 'pending' }, createdAt: { $lt: before } }).exec();
    },
  };
}

export type WebhookStore = ReturnType<typeof createWebhookStore>;
