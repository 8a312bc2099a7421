// API key material: generation, the SHA-256 digest kept for lookup, and the AES-256-GCM
// sealed copy kept for SigV4 (the S3 interface must recompute signatures with the secret).
import crypto from 'node:crypto';
import { API_KEY_PREFIX, API_KEY_PREFIX_LENGTH, API_KEY_RANDOM_LENGTH } from './constants.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform base62 string: bytes of 248 and above are dropped so no character is favoured. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** A base62 string of `length` (at most 32) that is a function of `text`: SHA-256's bytes, each
 * taken mod 62 (slightly uneven, which an ID derived to be found again does not mind). */
export function hashedBase62(text: string, length: number): string {
  const bytes = crypto.createHash('sha256').update(text).digest();
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[bytes[i]! % 62];
  return out;
}

export function newApiKey(): { apiKey: string; keyPrefix: string } {
  const apiKey = API_KEY_PREFIX + randomBase62(API_KEY_RANDOM_LENGTH);
  return { apiKey, keyPrefix: apiKey.slice(0, API_KEY_PREFIX_LENGTH) };
}

export const looksLikeApiKey = (value: string): boolean =>
  value.length === API_KEY_PREFIX.length + API_KEY_RANDOM_LENGTH &&
  value.startsWith(API_KEY_PREFIX) &&
  /^[0-9A-Za-z]+$/.test(value.slice(API_KEY_PREFIX.length));

export const digest = (secret: string): string => crypto.createHash('sha256').update(secret).digest('hex');

/** Constant-time comparison of two hex digests of equal length. */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/** `v1.<iv>.<tag>.<ciphertext>`, base64url parts; the version leaves room for key rotation. */
export function seal(masterKey: Buffer, plaintext: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', masterKey, iv);
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), data].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
}

export function unseal(masterKey: Buffer, sealed: string): string {
  const [version, iv, tag, data] = sealed.split('.');
  if (version !== 'v1' || !iv || !tag || !data) throw new Error('unknown sealed secret format');
  const decipher = crypto.createDecipheriv('aes-256-gcm', masterKey, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
}

export const newMasterKey = (): string => crypto.randomBytes(32).toString('hex');
