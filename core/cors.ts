// Per-folder (per-bucket) CORS configuration in S3's model (docs/api/contract.md, "CORS"). The REST
// `PUT /folders/:id/cors` and, later, S3's PutBucketCors write the same document, and the S3
// interface and the gateway will decide browser access with `matchCorsRule` and
// `corsResponseHeaders` below. The rules are S3's, checked here so that every surface refuses
// the same configurations with the same details.
import type { CorsRecord, CorsRule } from '../infra/db/cors.js';
import type { UseCaseDeps } from './deps.js';
import { InvalidInput, NotFound } from './errors.js';

export type { CorsRule };
type CorsDeps = Pick<UseCaseDeps, 'db'>;

export interface CorsConfiguration {
  CORSRules: CorsRule[];
}

/**
 * A configuration as a surface read it. Required fields may be missing: their presence is one
 * of the rules checked here, so a JSON body and (later) an S3 XML body get the same answer.
 */
export interface CorsRuleInput {
  AllowedOrigins?: string[];
  AllowedMethods?: string[];
  AllowedHeaders?: string[];
  ExposeHeaders?: string[];
  MaxAgeSeconds?: number;
  ID?: string;
}
export interface CorsInput {
  CORSRules?: CorsRuleInput[];
}

export const CORS_METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'HEAD'];
export const CORS_MAX_RULES = 100;
export const CORS_ID_MAX_LENGTH = 255;
/** The reason of every configuration S3 would refuse. */
export const INVALID_CORS = 'INVALID_CORS';

// Origins and header names end up in response headers (an echoed origin, Expose-Headers), so
// they are held to what a header may carry: origins to visible ASCII, header names to
// RFC 9110 tokens (which include `*`).
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const stars = (text: string) => text.split('*').length - 1;
/** Problems listed in one answer at most; a configuration of 100 bad rules says enough with these. */
const MAX_PROBLEMS = 20;

/** The problems of one rule, each naming its field: `CORSRules[i].Field[j]: …`. */
function ruleProblems(rule: CorsRuleInput, at: string): string[] {
  const problems: string[] = [];
  const list = (field: 'AllowedOrigins' | 'AllowedMethods' | 'AllowedHeaders' | 'ExposeHeaders', required: boolean) => {
    const values = rule[field];
    if (values === undefined) {
      if (required) problems.push(`${at}.${field}: required, with at least one entry`);
      return [];
    }
    if (required && values.length === 0) problems.push(`${at}.${field}: needs at least one entry`);
    return values.map((value, j) => [value, `${at}.${field}[${j}]`] as const);
  };

  for (const [origin, where] of list('AllowedOrigins', true)) {
    if (!VISIBLE_ASCII.test(origin)) problems.push(`${where}: an origin is visible ASCII characters, without spaces`);
    else if (stars(origin) > 1) problems.push(`${where}: ${JSON.stringify(origin)} has more than one * wildcard`);
  }
  for (const [method, where] of list('AllowedMethods', true)) {
    if (!CORS_METHODS.includes(method)) problems.push(`${where}: ${JSON.stringify(method)} is not one of ${CORS_METHODS.join(', ')}`);
  }
  for (const [header, where] of list('AllowedHeaders', false)) {
    if (!TOKEN.test(header)) problems.push(`${where}: ${JSON.stringify(header)} is not a header name`);
    else if (stars(header) > 1) problems.push(`${where}: ${JSON.stringify(header)} has more than one * wildcard`);
  }
  for (const [header, where] of list('ExposeHeaders', false)) {
    if (!TOKEN.test(header)) problems.push(`${where}: ${JSON.stringify(header)} is not a header name`);
  }
  const { MaxAgeSeconds, ID } = rule;
  if (MaxAgeSeconds !== undefined && !(Number.isSafeInteger(MaxAgeSeconds) && MaxAgeSeconds >= 0)) {
    problems.push(`${at}.MaxAgeSeconds: a whole number of seconds, 0 or more`);
  }
  // Characters, not UTF-16 units, as S3 and JSON Schema count them.
  if (ID !== undefined && [...ID].length > CORS_ID_MAX_LENGTH) problems.push(`${at}.ID: at most ${CORS_ID_MAX_LENGTH} characters`);
  return problems;
}

/** Only the fields given, in S3's order: a configuration reads back as it was written. */
const ruleOf = (r: CorsRule): CorsRule => ({
  AllowedOrigins: r.AllowedOrigins,
  AllowedMethods: r.AllowedMethods,
  ...(r.AllowedHeaders !== undefined ? { AllowedHeaders: r.AllowedHeaders } : {}),
  ...(r.ExposeHeaders !== undefined ? { ExposeHeaders: r.ExposeHeaders } : {}),
  ...(r.MaxAgeSeconds !== undefined ? { MaxAgeSeconds: r.MaxAgeSeconds } : {}),
  ...(r.ID !== undefined ? { ID: r.ID } : {}),
});

/** The configuration as it is stored, or InvalidInput (`INVALID_CORS`) naming every problem. */
export function validateCors(input: CorsInput): CorsConfiguration {
  const rules = input.CORSRules ?? [];
  const problems: string[] = [];
  if (rules.length === 0) problems.push('CORSRules: at least one rule is required');
  if (rules.length > CORS_MAX_RULES) problems.push(`CORSRules: at most ${CORS_MAX_RULES} rules, got ${rules.length}`);
  rules.forEach((rule, i) => problems.push(...ruleProblems(rule, `CORSRules[${i}]`)));
  if (problems.length > 0) {
    const more = problems.length > MAX_PROBLEMS ? `; and ${problems.length - MAX_PROBLEMS} more` : '';
    throw new InvalidInput(problems.slice(0, MAX_PROBLEMS).join('; ') + more, INVALID_CORS);
  }
  // Every rule was checked to have both lists.
  return { CORSRules: rules.map((r) => ruleOf(r as CorsRule)) };
}

const noConfiguration = () => new NotFound('CORS configuration', 'NO_CORS_CONFIGURATION');

async function ownFolder(deps: CorsDeps, userId: string, folderId: string): Promise<void> {
  // Another user's folder is as good as missing (NotFound never tells the two apart).
  if (!(await deps.db.folders.findForUser(userId, folderId))) throw new NotFound('folder');
}

const configurationOf = (record: CorsRecord): CorsConfiguration => ({ CORSRules: record.CORSRules.map(ruleOf) });

export async function getCors(deps: CorsDeps, userId: string, folderId: string): Promise<CorsConfiguration> {
  // Both reads by `_id` at once; the configuration is shown only once the folder is the caller's.
  const [, record] = await Promise.all([ownFolder(deps, userId, folderId), deps.db.cors.get(folderId)]);
  if (!record) throw noConfiguration();
  return configurationOf(record);
}

/** Replaces the folder's configuration as a whole (S3's PutBucketCors), returning what is stored. */
export async function putCors(deps: CorsDeps, userId: string, folderId: string, input: CorsInput): Promise<CorsConfiguration> {
  const configuration = validateCors(input);
  await ownFolder(deps, userId, folderId);
  await deps.db.cors.put({ _id: folderId, userId, CORSRules: configuration.CORSRules, updatedAt: Date.now() });
  return configuration;
}

/**
 * Removes the configuration; 404 `NO_CORS_CONFIGURATION` when there is none, like the REST
 * API's other deletes. (S3's DeleteBucketCors succeeds either way: that surface maps it.)
 */
export async function deleteCors(deps: CorsDeps, userId: string, folderId: string): Promise<{ folderId: string }> {
  await ownFolder(deps, userId, folderId);
  if (!(await deps.db.cors.delete(folderId))) throw noConfiguration();
  return { folderId };
}

// Evaluation, for the S3 interface and the gateway.

/** S3's match: exact, or with one `*` standing for any run of characters (none included). */
function wildcardMatch(pattern: string, value: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern === value;
  const prefix = pattern.slice(0, star);
  const suffix = pattern.slice(star + 1);
  return value.length >= prefix.length + suffix.length && value.startsWith(prefix) && value.endsWith(suffix);
}

/** The header names of an `Access-Control-Request-Headers` value. */
export const requestedHeaders = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);

export interface CorsRequest {
  /** The `Origin` header. */
  origin: string;
  /** The request's method, or a preflight's `Access-Control-Request-Method`. */
  method: string;
  /** A preflight's `Access-Control-Request-Headers`, as names (`requestedHeaders`). */
  requestHeaders?: string[];
}

/**
 * The first rule that allows the request, or null (S3's semantics): the origin matches one of
 * the rule's AllowedOrigins (case-sensitive, one `*` wildcard), the method is one of its
 * AllowedMethods, and every requested header matches one of its AllowedHeaders
 * (case-insensitive, one `*` wildcard each).
 */
export function matchCorsRule(config: CorsConfiguration, request: CorsRequest): CorsRule | null {
  if (!request.origin) return null;
  const headers = (request.requestHeaders ?? []).map((h) => h.toLowerCase());
  for (const rule of config.CORSRules) {
    if (!rule.AllowedOrigins.some((o) => wildcardMatch(o, request.origin))) continue;
    if (!rule.AllowedMethods.includes(request.method)) continue;
    const allowed = (rule.AllowedHeaders ?? []).map((h) => h.toLowerCase());
    if (!headers.every((h) => allowed.some((a) => wildcardMatch(a, h)))) continue;
    return rule;
  }
  return null;
}

/**
 * The CORS response headers for a request that `rule` matched. The origin is echoed, or `*`
 * when the rule allowed it by a lone `*`. Allow-Headers names the headers asked for rather
 * than the rule's entries, as S3 does: a browser understands no `x-amz-*` pattern there.
 * `Vary: Origin` because the answer depends on the origin; a surface that sends its own Vary
 * merges the two. (Preflight answers are OPTIONS, which no HTTP cache stores, so they need
 * not vary on the Access-Control-Request-* headers.)
 */
export function corsResponseHeaders(rule: CorsRule, request: Pick<CorsRequest, 'origin' | 'requestHeaders'>): Record<string, string> {
  const byOrigin = rule.AllowedOrigins.find((o) => wildcardMatch(o, request.origin));
  const headers: Record<string, string> = {
    'Access-Control-Allow-Origin': byOrigin === '*' ? '*' : request.origin,
    'Access-Control-Allow-Methods': rule.AllowedMethods.join(', '),
  };
  if (request.requestHeaders?.length) headers['Access-Control-Allow-Headers'] = request.requestHeaders.join(', ');
  if (rule.ExposeHeaders?.length) headers['Access-Control-Expose-Headers'] = rule.ExposeHeaders.join(', ');
  if (rule.MaxAgeSeconds !== undefined) headers['Access-Control-Max-Age'] = String(rule.MaxAgeSeconds);
  headers.Vary = 'Origin';
  return headers;
}
