// SigV4 authentication of S3 requests, verified with @smithy/signature-v4: the request is
// rebuilt with exactly the headers the client signed, signed (or presigned) again at the
// client's date with the secret of its access key, and the two signatures compared in
// constant time. The canonical request is smithy's, never ours.
//
//   authenticate(req, url, lookupSecret, now?): Promise<Authenticated>
//     `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`, or a
//     presigned URL (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
//     `X-Amz-SignedHeaders`, `X-Amz-Signature`). Any region is accepted (the credential
//     scope's). Header auth allows ±15 min of clock skew; a presigned URL lives X-Amz-Expires
//     (at most 7 days) from X-Amz-Date. Throws S3Error: AccessDenied (no auth, expired,
//     unsigned x-amz-* headers), InvalidAccessKeyId, SignatureDoesNotMatch,
//     RequestTimeTooSkewed, AuthorizationHeaderMalformed, AuthorizationQueryParametersError,
//     InvalidRequest (SigV2, SigV4a), InvalidToken (session tokens), NotImplemented.
//
// The path is taken raw from req.url (as the client encoded it, which is what it signed);
// `url` gives the query. Build it from req.url without letting the URL parser read the path
// as an authority: `new URL('http://s3' + req.url)`, never `new URL(req.url, base)` (a key
// starting with `//` would become a host). Take the bucket and key from `Authenticated.path`,
// never from `url.pathname`, which resolves `..` segments the client signed as they were.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Hash } from '@smithy/hash-node';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';
import { S3Error } from './errors.js';

export interface Authenticated {
  accessKeyId: string;
  /** The key's secret, as lookupSecret gave it. */
  secret: string;
  /** The credential scope's region. */
  region: string;
  presigned: boolean;
  /** The x-amz-content-sha256 header (a hex digest, UNSIGNED-PAYLOAD, STREAMING-…); UNSIGNED-PAYLOAD for a presigned URL without it. */
  payloadHash: string;
  /** The request's path as sent, percent-encoding and all: the bucket and key come from it. */
  path: string;
  /**
   * A presigned URL's other x-amz-* parameters (names lowercased), signed as part of the
   * query: S3 applies some as headers (x-amz-acl, x-amz-meta-*, x-amz-storage-class); the
   * surface decides. decodeBody ignores x-amz-checksum-* here, as S3 does.
   */
  hoisted: Record<string, string>;
  /** What decodeBody needs to verify the signatures of aws-chunked chunks and trailers. */
  chain: SignatureChain;
}

export interface SignatureChain {
  /** The request's own signature: the previous signature of the first chunk. */
  seed: string;
  /** X-Amz-Date, `YYYYMMDDTHHMMSSZ`. */
  longDate: string;
  /** `YYYYMMDD/<region>/s3/aws4_request`. */
  scope: string;
  /** HMAC-SHA256 (hex) of a string to sign under the request's signing key, by smithy. */
  sign(stringToSign: string): Promise<string>;
}

export type LookupSecret = (accessKeyId: string) => Promise<string | null>;

const ALGORITHM = 'AWS4-HMAC-SHA256';
const MAX_SKEW_MS = 15 * 60 * 1000;
const MAX_EXPIRES_S = 7 * 24 * 3600;
const HEX64 = /^[0-9a-f]{64}$/;
const LONG_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9a-z-]+(;[!#$%&'*+.^_`|~0-9a-z-]+)*$/;
const PAYLOAD_HASHES = new Set([
  'UNSIGNED-PAYLOAD',
  'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER',
  'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD',
  'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER',
]);
const V4_ONLY = 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.';
// Given to smithy's presign as the body: anything but a string or bytes makes it sign UNSIGNED-PAYLOAD.
const STREAM_BODY = Object.freeze({});

/** Everything a signature is computed over, read from the request before any secret is looked up. */
interface Claim {
  presigned: boolean;
  accessKeyId: string;
  region: string;
  date: Date;
  longDate: string;
  scope: string;
  signedHeaders: string[];
  signature: string;
  expiresIn: number;
  payloadHash: string;
}

function parseLongDate(text: string | undefined): Date | null {
  const m = LONG_DATE.exec(text ?? '');
  if (!m) return null;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  const date = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!));
  // Date.UTC rolls a 13th month or a 61st second over; such a date is not one.
  return date.getUTCMonth() === mo! - 1 && date.getUTCDate() === d! && date.getUTCSeconds() === s! ? date : null;
}

/** `<access key>/<YYYYMMDD>/<region>/s3/aws4_request`, its date that of X-Amz-Date. */
function parseCredential(credential: string, longDate: string, malformed: (message: string) => S3Error) {
  const parts = credential.split('/');
  if (parts.length !== 5 || !parts[0] || !/^\d{8}$/.test(parts[1]!) || !parts[2] || parts[4] !== 'aws4_request') {
    throw malformed('the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".');
  }
  if (parts[3] !== 's3') throw malformed(`incorrect service "${parts[3]}". This endpoint belongs to "s3".`);
  if (parts[1] !== longDate.slice(0, 8)) throw malformed(`Invalid credential date "${parts[1]}". This date is not the same as X-Amz-Date.`);
  return { accessKeyId: parts[0], region: parts[2], scope: parts.slice(1).join('/') };
}

function parseSignedHeaders(list: string, malformed: (message: string) => S3Error): string[] {
  if (!HEADER_LIST.test(list)) throw malformed('SignedHeaders is mal-formed.');
  const names = list.split(';');
  if (!names.includes('host')) throw malformed('the host header must be signed.');
  // smithy's sign() drops a Date header and signs X-Amz-Date in its place; no SDK signs Date.
  if (names.includes('date')) throw new S3Error('NotImplemented', 'Signing the Date header is not supported; sign X-Amz-Date instead.');
  return names;
}

function headerClaim(req: IncomingMessage, authorization: string, now: number): Claim {
  const malformed = (message: string) => new S3Error('AuthorizationHeaderMalformed', `The authorization header is malformed; ${message}`);
  const space = authorization.indexOf(' ');
  const algorithm = space < 0 ? authorization : authorization.slice(0, space);
  if (algorithm !== ALGORITHM) throw new S3Error('InvalidRequest', V4_ONLY);
  const fields = new Map<string, string>();
  for (const part of authorization.slice(space + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (!credential || !signedHeaders || !signature) throw malformed('it must have Credential, SignedHeaders and Signature.');
  if (!HEX64.test(signature)) throw malformed('the Signature is not 64 lowercase hex digits.');
  const longDate = req.headers['x-amz-date'];
  const date = parseLongDate(typeof longDate === 'string' ? longDate : undefined);
  if (!date || typeof longDate !== 'string') {
    throw new S3Error('AccessDenied', 'AWS authentication requires a valid X-Amz-Date header (YYYYMMDDTHHMMSSZ).');
  }
  const scope = parseCredential(credential, longDate, malformed);
  if (Math.abs(now - date.getTime()) > MAX_SKEW_MS) {
    throw new S3Error('RequestTimeTooSkewed', undefined, {
      RequestTime: longDate,
      ServerTime: new Date(now).toISOString(),
      MaxAllowedSkewMilliseconds: String(MAX_SKEW_MS),
    });
  }
  if (req.headers['x-amz-security-token'] !== undefined) throw new S3Error('InvalidToken', 'Session tokens are not supported.');
  const payloadHash = req.headers['x-amz-content-sha256'];
  if (typeof payloadHash !== 'string') {
    throw new S3Error('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
  }
  if (!HEX64.test(payloadHash) && !PAYLOAD_HASHES.has(payloadHash)) {
    throw new S3Error('InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-… value, or a valid sha256 value.');
  }
  return {
    presigned: false,
    ...scope,
    date,
    longDate,
    signedHeaders: parseSignedHeaders(signedHeaders, malformed),
    signature,
    expiresIn: 0,
    payloadHash,
  };
}

function queryClaim(req: IncomingMessage, query: URLSearchParams, now: number): Claim {
  const malformed = (message: string) => new S3Error('AuthorizationQueryParametersError', message);
  if (query.get('X-Amz-Algorithm') !== ALGORITHM) throw malformed('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
  const [credential, longDate, expires, signedHeaders, signature] = [
    'X-Amz-Credential',
    'X-Amz-Date',
    'X-Amz-Expires',
    'X-Amz-SignedHeaders',
    'X-Amz-Signature',
  ].map((name) => query.get(name));
  if (!credential || !longDate || !expires || !signedHeaders || !signature) {
    throw malformed(
      'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
    );
  }
  const date = parseLongDate(longDate);
  if (!date) throw malformed("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  // A negative lifetime is a URL that had expired when it was made: AccessDenied below, as S3 answers.
  if (!/^-?\d{1,7}$/.test(expires)) throw malformed('X-Amz-Expires should be a number');
  const expiresIn = Number(expires);
  if (expiresIn > MAX_EXPIRES_S) throw malformed('X-Amz-Expires must be less than a week (in seconds) that is 604800');
  if (!HEX64.test(signature)) throw malformed('X-Amz-Signature is not 64 lowercase hex digits.');
  if (query.has('X-Amz-Security-Token')) throw new S3Error('InvalidToken', 'Session tokens are not supported.');
  const scope = parseCredential(credential, longDate, (message) => malformed(`Error parsing the X-Amz-Credential parameter; ${message}`));
  if (date.getTime() - now > MAX_SKEW_MS) throw new S3Error('AccessDenied', 'Request is not valid yet');
  if (now > date.getTime() + expiresIn * 1000) {
    throw new S3Error('AccessDenied', 'Request has expired', {
      'X-Amz-Expires': expires,
      Expires: new Date(date.getTime() + expiresIn * 1000).toISOString(),
      ServerTime: new Date(now).toISOString(),
    });
  }
  const header = req.headers['x-amz-content-sha256'];
  const payloadHash = typeof header === 'string' && (HEX64.test(header) || PAYLOAD_HASHES.has(header)) ? header : 'UNSIGNED-PAYLOAD';
  return {
    presigned: true,
    ...scope,
    date,
    longDate,
    signedHeaders: parseSignedHeaders(signedHeaders, malformed),
    signature,
    expiresIn,
    payloadHash,
  };
}

/** The request-target's path, as sent (an absolute-form target loses its scheme and authority). */
function rawPath(req: IncomingMessage): string {
  const target = req.url ?? '/';
  const path = target.split('?', 1)[0]!;
  const absolute = /^https?:\/\/[^/]*/i.exec(path);
  return absolute ? path.slice(absolute[0].length) || '/' : path;
}

/**
 * The same path in AWS's canonical encoding (every byte but A-Z a-z 0-9 - _ . ~ as %XX,
 * slashes kept), for clients that send a character unencoded, or lowercase hex, but sign the
 * canonical form. It names the same key, so accepting either signature grants nothing more.
 */
function canonicalPath(path: string): string | null {
  try {
    return path
      .split('/')
      .map((segment) =>
        encodeURIComponent(decodeURIComponent(segment)).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`),
      )
      .join('/');
  } catch {
    return null;
  }
}

/** The signed headers' values as the client sent them (repeated headers joined by commas, as SigV4 joins them). */
function signedHeaderValues(req: IncomingMessage, names: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of names) {
    const values = req.headersDistinct[name];
    if (values) headers[name] = signedText(values.join(','));
  }
  return headers;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header's value as the text the client signed. SigV4 signs the UTF-8 of the value, and Node
 * reads a header's bytes one character each (latin1): botocore (the aws CLI) sends a value
 * like `café` in UTF-8, whose two bytes for `é` would otherwise be signed here as two
 * characters. Bytes that are not UTF-8 stay as read (a client that sent `é` as one byte
 * signed the character it meant).
 */
function signedText(value: string): string {
  if (!/[^ -~\t]/.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return value;
  }
}

/** The query for smithy: names and values decoded (smithy encodes them again), repeated names as arrays. */
function queryRecord(query: URLSearchParams, drop?: string): Record<string, string | string[]> {
  const record: Record<string, string | string[]> = {};
  for (const [name, value] of query) {
    if (name === drop) continue;
    const current = record[name];
    record[name] = current === undefined ? value : Array.isArray(current) ? [...current, value] : [current, value];
  }
  return record;
}

function sameSignature(expected: string, provided: string): boolean {
  return expected.length === provided.length && timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(provided, 'hex'));
}

/** What smithy computes for this request at the claimed date, over `path`. */
async function expectedSignature(signer: SignatureV4, req: IncomingMessage, query: URLSearchParams, claim: Claim, path: string) {
  const signed = new Set(claim.signedHeaders);
  const headers = signedHeaderValues(req, claim.signedHeaders);
  if (claim.presigned) {
    // presign() hoists x-amz-* headers into the query unless told not to, and signs the
    // payload as UNSIGNED-PAYLOAD only when the body is neither absent nor bytes.
    const request = new HttpRequest({ method: req.method, path, query: queryRecord(query, 'X-Amz-Signature'), headers, body: STREAM_BODY });
    const presigned = await signer.presign(request, {
      signingDate: claim.date,
      expiresIn: claim.expiresIn,
      signableHeaders: signed,
      unhoistableHeaders: signed,
    });
    return String(presigned.query?.['X-Amz-Signature'] ?? '');
  }
  // sign() always writes X-Amz-Date and takes the payload hash from x-amz-content-sha256;
  // either one the client did not sign is still given, but kept out of the signed headers.
  const unsignable = new Set<string>();
  headers['x-amz-content-sha256'] = claim.payloadHash;
  for (const name of ['x-amz-date', 'x-amz-content-sha256']) if (!signed.has(name)) unsignable.add(name);
  const request = new HttpRequest({ method: req.method, path, query: queryRecord(query), headers });
  const result = await signer.sign(request, { signingDate: claim.date, signableHeaders: signed, unsignableHeaders: unsignable });
  return /Signature=([0-9a-f]{64})/.exec(String(result.headers.authorization))?.[1] ?? '';
}

export async function authenticate(req: IncomingMessage, url: URL, lookupSecret: LookupSecret, now = Date.now()): Promise<Authenticated> {
  const authorization = req.headers.authorization;
  const query = url.searchParams;
  const queryAuth = query.has('X-Amz-Algorithm') || query.has('X-Amz-Signature') || query.has('X-Amz-Credential');
  if (authorization !== undefined && queryAuth) {
    throw new S3Error(
      'InvalidArgument',
      'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    );
  }
  if (query.has('AWSAccessKeyId') && query.has('Signature')) throw new S3Error('InvalidRequest', V4_ONLY);
  if (authorization === undefined && !queryAuth) throw new S3Error('AccessDenied');
  const claim = authorization !== undefined ? headerClaim(req, authorization, now) : queryClaim(req, query, now);

  // Every x-amz-* header must be signed (x-amz-content-sha256 is, as the canonical request's
  // payload line), or a holder of a presigned URL could add any (x-amz-meta-*, x-amz-acl).
  const notSigned = Object.keys(req.headers).filter(
    (name) => name.startsWith('x-amz-') && name !== 'x-amz-content-sha256' && !claim.signedHeaders.includes(name),
  );
  if (notSigned.length > 0) {
    throw new S3Error('AccessDenied', 'There were headers present in the request which were not signed', {
      HeadersNotSigned: notSigned.join(', '),
    });
  }

  const secret = await lookupSecret(claim.accessKeyId);
  if (secret === null) throw new S3Error('InvalidAccessKeyId', undefined, { AWSAccessKeyId: claim.accessKeyId });

  const signer = new SignatureV4({
    service: 's3',
    region: claim.region,
    credentials: { accessKeyId: claim.accessKeyId, secretAccessKey: secret },
    sha256: Hash.bind(null, 'sha256'),
    uriEscapePath: false,
    applyChecksum: false,
  });
  const path = rawPath(req);
  let verified = sameSignature(await expectedSignature(signer, req, query, claim, path), claim.signature);
  const alternative = verified ? null : canonicalPath(path);
  if (alternative !== null && alternative !== path) {
    verified = sameSignature(await expectedSignature(signer, req, query, claim, alternative), claim.signature);
  }
  if (!verified) {
    throw new S3Error('SignatureDoesNotMatch', undefined, { AWSAccessKeyId: claim.accessKeyId, SignatureProvided: claim.signature });
  }

  const hoisted: Record<string, string> = {};
  if (claim.presigned) {
    for (const [name, value] of query) {
      const lower = name.toLowerCase();
      if (lower.startsWith('x-amz-') && !/^x-amz-(algorithm|credential|date|expires|signedheaders|signature)$/.test(lower)) {
        hoisted[lower] = value;
      }
    }
  }
  return {
    accessKeyId: claim.accessKeyId,
    secret,
    region: claim.region,
    presigned: claim.presigned,
    payloadHash: claim.payloadHash,
    path,
    hoisted,
    chain: {
      seed: claim.signature,
      longDate: claim.longDate,
      scope: claim.scope,
      sign: (stringToSign) => signer.sign(stringToSign, { signingDate: claim.date }),
    },
  };
}
