// The pinning service API's shapes (v1.0.0; docs/api/contract.md, "Pinning Service API"): the
// PinStatus it answers, and its list query read from the URL. Only properties the spec defines
// leave here; every failure is a use-case error or InvalidInput, answered as the spec's Failure.
import { z } from 'zod';
import type { PinQuery, PinRecord } from '../../core/pins.js';
import { cidInput, metadataSchema, origin } from '../../core/content.js';
import { InvalidInput } from '../../core/errors.js';

const STATUSES = ['queued', 'pinning', 'pinned', 'failed'] as const;
const MATCHES = ['exact', 'iexact', 'partial', 'ipartial'] as const;
export const DEFAULT_LIMIT = 10;
const MAX_LIMIT = 1000;
const MAX_CIDS = 10;

export function pinStatus(p: PinRecord, delegates: string[]) {
  return {
    requestid: p.requestId,
    status: p.status,
    created: new Date(p.createdAt).toISOString(),
    pin: { cid: p.cid, ...(p.name !== null ? { name: p.name } : {}), origins: p.origins, meta: p.metadata },
    delegates,
    info: p.error ? { status_details: `${p.error.reason}: ${p.error.details}` } : {},
  };
}

/** A Pin object of a POST body. Clients may send `null` for what they leave out. */
export const pinBody = z.object({
  cid: z.string().min(1),
  name: z.string().max(255).nullish(),
  origins: z
    .array(origin)
    .max(20)
    .nullish()
    .transform((o) => [...new Set(o ?? [])]),
  meta: metadataSchema.nullish().transform((m) => m ?? {}),
});

const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * An RFC 3339 time as whole milliseconds and whether digits below the millisecond were cut.
 * A `+` of an offset sent unencoded arrives as a space; it is read as the `+` it was.
 */
function parseTime(name: string, text: string): { ms: number; cut: boolean } {
  const m = RFC3339.exec(text.replace(/ (\d{2}:\d{2})$/, '+$1'));
  const fraction = m?.[3] ?? '';
  const ms = m ? Date.parse(`${m[1]}T${m[2]}.${fraction.slice(0, 3).padEnd(3, '0')}${m[4]!.toUpperCase()}`) : NaN;
  if (!m || Number.isNaN(ms)) throw new InvalidInput(`${name} must be an RFC 3339 time, e.g. 2020-07-27T17:32:28Z`, 'BAD_REQUEST');
  return { ms, cut: /[1-9]/.test(fraction.slice(3)) };
}

function csv(params: URLSearchParams, name: string): string[] | undefined {
  const values = params.getAll(name);
  if (values.length === 0) return undefined;
  const items = values.flatMap((v) => v.split(',')).filter((v) => v !== '');
  if (items.length === 0) throw new InvalidInput(`${name} must list at least one value`, 'BAD_REQUEST');
  return [...new Set(items)];
}

function metaFilter(params: URLSearchParams): Record<string, string> | undefined {
  const pairs: Record<string, string> = {};
  const json = params.get('meta');
  if (json !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      throw new InvalidInput('meta must be a JSON object of strings, URL-encoded', 'BAD_REQUEST');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string'))
      throw new InvalidInput('meta must be a JSON object of strings, URL-encoded', 'BAD_REQUEST');
    Object.assign(pairs, parsed);
  }
  for (const [key, value] of params) {
    const m = /^meta\[(.+)\]$/.exec(key);
    if (m) pairs[m[1]!] = value;
  }
  return Object.keys(pairs).length > 0 ? pairs : undefined;
}

/**
 * The list query. `before` and `after` are exclusive; creation times are whole milliseconds,
 * so a `before` with digits below the millisecond still includes that millisecond. No `status`
 * means every status (the compliance checker's name-match test counts a fresh, queued pin).
 * A metadata key no request can have (metadata keys are [A-Za-z0-9_]) matches nothing.
 */
export function listQuery(params: URLSearchParams): { query: PinQuery; limit: number; impossible: boolean } {
  const query: PinQuery = {};
  const cids = csv(params, 'cid');
  if (cids) {
    if (cids.length > MAX_CIDS) throw new InvalidInput(`cid takes at most ${MAX_CIDS} CIDs`, 'BAD_REQUEST');
    query.multihashes = cids.map((c) => cidInput(c).multihash);
  }
  const statuses = csv(params, 'status');
  if (statuses) {
    const bad = statuses.find((s) => !(STATUSES as readonly string[]).includes(s));
    if (bad !== undefined) throw new InvalidInput(`status ${JSON.stringify(bad)} is not one of ${STATUSES.join(', ')}`, 'BAD_REQUEST');
    query.statuses = statuses as PinQuery['statuses'];
  }
  const name = params.get('name');
  const match = params.get('match') ?? 'exact';
  if (!(MATCHES as readonly string[]).includes(match)) throw new InvalidInput(`match must be one of ${MATCHES.join(', ')}`, 'BAD_REQUEST');
  if (name !== null) {
    if (name.length > 255) throw new InvalidInput('name is at most 255 characters', 'BAD_REQUEST');
    query.name = { text: name, match: match as (typeof MATCHES)[number] };
  }
  const before = params.get('before');
  if (before !== null) {
    const t = parseTime('before', before);
    query.before = t.cut ? t.ms + 1 : t.ms;
  }
  const after = params.get('after');
  if (after !== null) query.after = parseTime('after', after).ms;
  const limitText = params.get('limit');
  const limit = limitText === null ? DEFAULT_LIMIT : /^\d{1,4}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= MAX_LIMIT)) throw new InvalidInput(`limit must be a whole number from 1 to ${MAX_LIMIT}`, 'BAD_REQUEST');
  const meta = metaFilter(params);
  let impossible = false;
  if (meta) {
    impossible = Object.keys(meta).some((k) => !/^[A-Za-z0-9_]{1,64}$/.test(k));
    query.metadata = meta;
  }
  return { query, limit, impossible };
}
