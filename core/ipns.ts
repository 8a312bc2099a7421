// IPNS use-cases. A name is an Ed25519 key the service keeps (infra/ipfs/ipns.ts) and a job that
// stores and republishes its records (workflows/ipns.ts). Names count against the plan's
// `ipnsNames`, publishes against its `ipnsPublishesPerMonth` (UTC months), each taken
// atomically before the work and given back when the work fails.
import { recordEvent } from './webhook-events.js';
import dns from 'node:dns/promises';
import type { ParsedCid } from '../infra/ipfs/cid.js';
import { DNSLINK_TIMEOUT_MS, IPNS_RECORD_VALIDITY_MS, IPNS_RESOLVE_TIMEOUT_MS, IPNS_STORE_TIMEOUT_MS } from '../infra/constants.js';
import { ipnsNamesCounter, utcMonth, type IpnsNameRecord } from '../infra/db/ipns-names.js';
import { announceHoldChangeIfAlone } from './hold-sync.js';
import { IpnsNameError, newIpnsKey, parseIpnsName, resolveThroughKubo, storeIpnsRecord } from '../infra/ipfs/ipns.js';
import { DELETE_SIGNAL, ipnsJob, REPUBLISH_SIGNAL, type IpnsInput } from '../infra/temporal/contracts/ipns.js';
import { cidInput, holdsChanged } from './content.js';
import type { Caller, UseCaseDeps } from './deps.js';
import { Conflict, InvalidInput, LimitReached, NotFound, Unavailable } from './errors.js';

export interface IpnsNameView {
  ipnsName: string;
  keyName: string;
  currentCid: string | null;
  sequence: number;
  lastPublishedAt: number | null;
  publishCountMonth: number;
  /** `active`; `republish-failing` while republishing fails; `expired` when the last stored
   * record's validity has passed (it failed for 48 h); `unpublished` before the first publish. */
  status: 'active' | 'republish-failing' | 'expired' | 'unpublished';
  lastRepublishedAt: number | null;
  createdAt: number;
}

export interface IpnsPublished {
  ipnsName: string;
  cid: string;
  sequence: number;
  publishedAt: number;
}

/** The counter of the user's publishes in the UTC month of `at` (also read by analytics.ts). */
export const publishesKey = (userId: string, at: number) => `ipns-publishes:${userId}:${utcMonth(at)}`;

function view(name: IpnsNameRecord, now = Date.now()): IpnsNameView {
  const month = utcMonth(now);
  let status: IpnsNameView['status'] = 'active';
  if (!name.cid) status = 'unpublished';
  else if ((name.lastRepublishedAt ?? name.lastPublishedAt ?? 0) + IPNS_RECORD_VALIDITY_MS < now) status = 'expired';
  else if (name.republishFailingSince !== null) status = 'republish-failing';
  return {
    ipnsName: name._id,
    keyName: name.keyName,
    currentCid: name.cid,
    sequence: name.sequence,
    lastPublishedAt: name.lastPublishedAt,
    publishCountMonth: name.publishMonth === month ? name.publishCount : 0,
    status,
    lastRepublishedAt: name.lastRepublishedAt,
    createdAt: name.createdAt,
  };
}

export function ipnsNameInput(value: string): string {
  try {
    return parseIpnsName(value);
  } catch (err) {
    throw new InvalidInput((err as IpnsNameError).message, 'INVALID_IPNS_NAME');
  }
}

const jobInput = (deps: UseCaseDeps, userId: string, ipnsName: string): IpnsInput => ({
  userId,
  ipnsName,
  republishEveryMs: deps.config.ipns.republishEveryMs,
});

/** The caller's name, or NOT_FOUND (another user's name is as good as missing). */
async function ownName(deps: UseCaseDeps, userId: string, ipnsName: string): Promise<IpnsNameRecord> {
  const name = await deps.db.ipnsNames.get(ipnsNameInput(ipnsName));
  if (!name || name.userId !== userId) throw new NotFound('IPNS name');
  return name;
}

export async function createIpnsName(
  deps: UseCaseDeps,
  caller: Caller,
  keyName: string,
): Promise<{ ipnsName: string; keyName: string; createdAt: number }> {
  const { user, plan } = caller;
  if (plan.ipnsNames <= 0) throw new LimitReached('IPNS_NAME_LIMIT', `your plan (${plan.label}) does not include IPNS names`);
  if (!(await deps.db.counters.take(ipnsNamesCounter(user._id), plan.ipnsNames))) {
    throw new LimitReached('IPNS_NAME_LIMIT', `your plan allows ${plan.ipnsNames} IPNS names`);
  }
  const createdAt = Date.now();
  let ipnsName: string;
  try {
    const key = await newIpnsKey(deps.config.masterKey);
    ipnsName = key.ipnsName;
    const sealedKey = key.sealedKey;
    const inserted = await deps.db.ipnsNames.insert({
      _id: ipnsName,
      userId: user._id,
      keyName,
      sealedKey,
      cid: null,
      multihash: null,
      sequence: 0,
      lastPublishedAt: null,
      publishMonth: null,
      publishCount: 0,
      lastRepublishedAt: null,
      republishFailingSince: null,
      lastRepublishError: null,
      createdAt,
    });
    if (!inserted) throw new Conflict('IPNS_NAME_EXISTS', `you have an IPNS name called ${JSON.stringify(keyName)} already`);
  } catch (err) {
    await deps.db.counters.give(ipnsNamesCounter(user._id)).catch(() => undefined);
    throw err;
  }
  // Its job runs from now on: it republishes the name's current record. A name whose job could
  // not start is removed again, so a retry makes it anew (the counter given back only then).
  try {
    await deps.jobs.start(ipnsJob, jobInput(deps, user._id, ipnsName));
  } catch (err) {
    if (await deps.db.ipnsNames.remove(ipnsName).catch(() => null))
      await deps.db.counters.give(ipnsNamesCounter(user._id)).catch(() => undefined);
    throw err;
  }
  return { ipnsName, keyName, createdAt };
}

export async function listIpnsNames(deps: UseCaseDeps, userId: string): Promise<IpnsNameView[]> {
  const now = Date.now();
  return (await deps.db.ipnsNames.listForUser(userId)).map((n) => view(n, now));
}

export async function getIpnsName(deps: UseCaseDeps, userId: string, ipnsName: string): Promise<IpnsNameView> {
  return view(await ownName(deps, userId, ipnsName));
}

/**
 * Points the name at `cid`: answered once the signed record is stored in Kubo. Done here, not
 * in the name's job: the sequence is raised atomically in MongoDB, and Kubo keeps the record
 * with the highest sequence whatever order records reach it in (measured: a put of sequence 1
 * after 2 is dropped), so a republish racing a publish cannot undo it. A store that fails
 * leaves the name pointing at the new target, and the job, asked to republish, stores it soon.
 */
export async function publishIpns(deps: UseCaseDeps, caller: Caller, ipnsName: string, cidText: string): Promise<IpnsPublished> {
  const { user, plan } = caller;
  const canonical = ipnsNameInput(ipnsName);
  const cid = cidInput(cidText);
  const counted = publishesKey(user._id, Date.now());
  if (!(await deps.db.counters.take(counted, plan.ipnsPublishesPerMonth))) {
    throw new LimitReached('IPNS_PUBLISH_LIMIT', `your plan allows ${plan.ipnsPublishesPerMonth} IPNS publishes a month`);
  }
  const publishedAt = Date.now();
  // The update is also the ownership check: it matches only the caller's name.
  let advanced: Awaited<ReturnType<typeof deps.db.ipnsNames.advance>>;
  try {
    advanced = await deps.db.ipnsNames.advance(canonical, user._id, { cid: cid.v1, multihash: cid.multihash }, publishedAt);
  } catch (err) {
    await deps.db.counters.give(counted).catch(() => undefined);
    throw err;
  }
  if (!advanced) {
    await deps.db.counters.give(counted).catch(() => undefined);
    throw new NotFound('IPNS name');
  }
  const name = advanced.previous;
  await deps.db.analytics.tryRecord(user._id, publishedAt, { publishes: 1 });
  await targetMoved(deps, name._id, name, cid);
  // Another process published the name moments ago: its record may reach Kubo with this one's.
  const contested =
    !deps.db.ipnsNames.publishedHere(name) && name.lastPublishedAt !== null && publishedAt - name.lastPublishedAt < IPNS_STORE_TIMEOUT_MS;
  try {
    const signal = AbortSignal.timeout(IPNS_STORE_TIMEOUT_MS);
    await storeIpnsRecord(
      deps.config.kubo.apiUrl,
      deps.config.masterKey,
      { ipnsName: name._id, sealedKey: name.sealedKey },
      cid.v1,
      advanced.sequence,
      signal,
      contested,
    );
  } catch {
    await deps.jobs.signal(ipnsJob, { ipnsName: name._id }, REPUBLISH_SIGNAL, []).catch(() => undefined);
    throw new Unavailable('kubo');
  }
  // No start of the name's job here: it runs from the name's creation, which answers only once
  // it started; one lost to a process dying in between is started by the audit
  // (name-without-republish), well within a record's 48 h validity.
  const published = { ipnsName: name._id, cid: cid.v1, sequence: advanced.sequence, publishedAt };
  await recordEvent(deps, user._id, { type: 'ipns.published', subject: `ipns:${name._id}`, data: { ...published, published: true } });
  return published;
}

/** The name now holds its new target and no longer its previous one. Announced only where it
 * can change Cluster's pin (core/hold-sync.ts). The two are of different content, so they are
 * looked at together: their reads share a round trip (infra/db/batch.ts). */
async function targetMoved(deps: UseCaseDeps, ipnsName: string, previous: IpnsNameRecord, target: ParsedCid): Promise<void> {
  if (previous.multihash === target.multihash) return;
  const self = { kind: 'ipns', key: ipnsName, userId: previous.userId };
  await Promise.all([
    announceHoldChangeIfAlone(deps, target.multihash, target.v1, self, 'added'),
    previous.multihash && previous.cid ? announceHoldChangeIfAlone(deps, previous.multihash, previous.cid, self, 'removed') : undefined,
  ]);
}

/** Deletes the name and its key; its job stops, and its target is released. */
export async function deleteIpnsName(deps: UseCaseDeps, userId: string, ipnsName: string): Promise<void> {
  const name = await ownName(deps, userId, ipnsName);
  const removed = await deps.db.ipnsNames.remove(name._id);
  if (!removed) throw new NotFound('IPNS name');
  await deps.db.counters.give(ipnsNamesCounter(userId));
  if (removed.cid) await holdsChanged(deps, cidInput(removed.cid));
  await deps.jobs.signal(ipnsJob, { ipnsName: name._id }, DELETE_SIGNAL, []).catch(() => undefined);
}

/** What any name points at: a name held here answers from MongoDB; any other through Kubo. */
export async function resolveIpns(deps: UseCaseDeps, ipnsName: string): Promise<{ ipnsName: string; cid: string; sequence?: number }> {
  const canonical = ipnsNameInput(ipnsName);
  const held = await deps.db.ipnsNames.get(canonical);
  if (held?.cid) return { ipnsName: canonical, cid: held.cid, sequence: held.sequence };
  const resolved = await resolveThroughKubo(deps.kubo, canonical, AbortSignal.timeout(IPNS_RESOLVE_TIMEOUT_MS)).catch(() => {
    throw new Unavailable('kubo');
  });
  if (!resolved) throw new NotFound('IPNS record');
  return { ipnsName: canonical, cid: cidInput(resolved).v1 };
}

export interface DnsLinkView {
  domain: string;
  record: { type: 'TXT'; name: string; value: string };
  /** Asked with verify: whether DNS has the record now; null when DNS could not be asked. */
  verified?: boolean | null;
  verifyError?: string;
}

const domainPattern = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

/** The TXT record that makes `domain` resolve through the name, and (verify) whether it exists. */
export async function dnsLinkFor(
  deps: UseCaseDeps,
  userId: string,
  ipnsName: string,
  domainText: string,
  verify: boolean,
): Promise<DnsLinkView> {
  const name = await ownName(deps, userId, ipnsName);
  const domain = domainText.trim().toLowerCase().replace(/\.$/, '');
  if (!domainPattern.test(domain))
    throw new InvalidInput(`${JSON.stringify(domainText.slice(0, 100))} is not a domain name`, 'INVALID_DOMAIN');
  const record = { type: 'TXT' as const, name: `_dnslink.${domain}`, value: `dnslink=/ipns/${name._id}` };
  if (!verify) return { domain, record };
  const resolver = new dns.Resolver({ timeout: DNSLINK_TIMEOUT_MS, tries: 1 });
  try {
    const txt = await resolver.resolveTxt(record.name);
    return { domain, record, verified: txt.some((parts) => parts.join('') === record.value) };
  } catch (err) {
    const code = (err as { code?: string }).code;
    // The name has no TXT record (or does not exist): DNS answered, and the answer is no.
    if (code === 'ENODATA' || code === 'ENOTFOUND') return { domain, record, verified: false };
    return { domain, record, verified: null, verifyError: `DNS could not be asked (${code ?? (err as Error).message})` };
  }
}
