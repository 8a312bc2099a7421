// Request bodies of the S3 surface, decoded and verified as they stream.
//
//   decodeBody(req, auth, { maxBytes, checksumHeaders? }): { stream, result }
//     `stream`: the object's bytes (aws-chunked framing removed), with backpressure; `result`:
//     {bytes, md5, checksums} once the stream has been read to its end. What the request's
//     headers get wrong (a malformed Content-MD5, an unknown payload mode, a declared length
//     over maxBytes) throws S3Error at once, before any byte is read.
//   readSmallBody(req, auth, limit, { checksumHeaders? }): Promise<Buffer>
//     The same, gathered: XML bodies (CompleteMultipartUpload, DeleteObjects, PutBucketCors).
//     `checksumHeaders: false`: the request's x-amz-checksum-* headers are not the body's
//     (CompleteMultipartUpload's are the object's).
//
// The mode is x-amz-content-sha256 (Authenticated.payloadHash): a hex digest (the body's
// SHA-256 is checked), UNSIGNED-PAYLOAD (presigned URLs too), STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// (aws-chunked, each chunk's signature chained from the request's), and the -TRAILER forms
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER is the JS SDK's default for stream bodies), whose
// checksum comes after the last chunk, as declared in x-amz-trailer. Content-MD5 and one
// x-amz-checksum-crc32|crc32c|crc64nvme|sha1|sha256 (a header or a trailer) are verified
// (infra/checksums.ts); the algorithms S3 added in 2026 (SHA512, MD5, XXHASH*) are
// NotImplemented, which the SDKs do not send unless asked. A presigned
// URL's x-amz-checksum-* parameters are ignored, as S3 ignores them: the JS SDK presigns
// PutObject with the CRC32 of an empty body (`x-amz-checksum-crc32=AAAAAA==`), which would
// refuse every upload through such a URL. MD5 is always computed: it is the object's ETag.
//
// Whatever is wrong with a body, the stream is destroyed with the S3Error before it ends: a
// consumer never sees 'end' for a bad body. Chunk signatures are checked as each chunk ends,
// everything else when the input has ended, in flush(), which runs before 'end'. Bytes of a
// bad body may already have been passed on by then, so a consumer discards what it wrote
// when the stream errors.
import { createHash, timingSafeEqual, type Hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import {
  CHECKSUM_LABELS,
  CHECKSUM_SIZES,
  createChecksum,
  isChecksumName,
  type Checksum,
  type ChecksumName,
} from '../../infra/checksums.js';
import type { Authenticated, SignatureChain } from './auth.js';
import { S3Error } from './errors.js';

export type { ChecksumName };
/** Base64 checksums the client sent, each verified against the bytes. */
export type Checksums = Partial<Record<ChecksumName, string>>;

export interface BodyResult {
  bytes: number;
  md5: Buffer;
  checksums: Checksums;
}

const UNSUPPORTED = new Set(['sha512', 'md5', 'xxhash64', 'xxhash3', 'xxhash128']);
const HEX64 = /^[0-9a-f]{64}$/;
const EMPTY_SHA256 = createHash('sha256').digest('hex');
const MAX_LINE = 4096;

/** What the headers announce about the body. */
interface Plan {
  chunked: boolean;
  signedChunks: boolean;
  trailers: boolean;
  sha256Hex?: string;
  md5?: Buffer;
  checksum?: { name: ChecksumName; value?: string; trailer: boolean };
  length?: number;
}

/** Strict base64 of `size` bytes, or null. */
function base64Of(text: string, size: number): Buffer | null {
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === size && bytes.toString('base64') === text ? bytes : null;
}

function malformed(message: string): S3Error {
  return new S3Error('InvalidRequest', `The aws-chunked body is malformed: ${message}`);
}

function sameHex(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));
}

/** A header's value; repeated headers (which none of these should be) joined as Node joins them. */
function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The checksum an `x-amz-checksum-<name>` header or trailer carries; null for other names. */
function checksumName(field: string): ChecksumName | null {
  if (!field.startsWith('x-amz-checksum-')) return null;
  const name = field.slice('x-amz-checksum-'.length);
  if (UNSUPPORTED.has(name)) {
    throw new S3Error('NotImplemented', `${name.toUpperCase()} checksums are not supported; use CRC32, CRC32C, CRC64NVME, SHA1 or SHA256.`);
  }
  return isChecksumName(name) ? name : null;
}

function planOf(req: IncomingMessage, auth: Authenticated, maxBytes: number, checksumHeaders: boolean): Plan {
  const mode = auth.payloadHash;
  const plan: Plan = { chunked: mode.startsWith('STREAMING-'), signedChunks: false, trailers: mode.endsWith('-TRAILER') };
  if (HEX64.test(mode)) plan.sha256Hex = mode;
  else if (mode.startsWith('STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD')) {
    throw new S3Error('NotImplemented', 'SigV4a (AWS4-ECDSA-P256-SHA256) is not supported; sign with AWS4-HMAC-SHA256.');
  } else if (mode === 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD' || mode === 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER') {
    if (auth.presigned) throw new S3Error('InvalidRequest', 'A presigned request cannot carry signed chunks.');
    plan.signedChunks = true;
  } else if (mode !== 'UNSIGNED-PAYLOAD' && mode !== 'STREAMING-UNSIGNED-PAYLOAD-TRAILER') {
    throw new S3Error('InvalidArgument', `x-amz-content-sha256 ${mode} is not a payload mode S3 knows.`);
  }

  const md5 = header(req, 'content-md5');
  if (md5 !== undefined) {
    plan.md5 = base64Of(md5.trim(), 16) ?? undefined;
    if (!plan.md5) throw new S3Error('InvalidDigest');
  }

  const sent: { name: ChecksumName; value?: string; trailer: boolean }[] = [];
  for (const [field, value] of checksumHeaders ? Object.entries(req.headers) : []) {
    const name = checksumName(field);
    if (!name || typeof value !== 'string') continue;
    // A value that cannot be the digest does not match it: S3 answers BadDigest, as for a wrong one.
    if (!base64Of(value, CHECKSUM_SIZES[name])) {
      throw new S3Error('BadDigest', `The ${CHECKSUM_LABELS[name]} you specified did not match the calculated checksum.`);
    }
    sent.push({ name, value, trailer: false });
  }
  const declared = header(req, 'x-amz-trailer');
  for (const trailer of declared ? declared.split(',').map((t) => t.trim().toLowerCase()) : []) {
    const name = checksumName(trailer);
    if (!name) throw new S3Error('InvalidRequest', `The trailer ${trailer} is not supported: only x-amz-checksum-* trailers are.`);
    if (!plan.trailers) throw new S3Error('InvalidRequest', `x-amz-trailer needs x-amz-content-sha256 STREAMING-…-TRAILER, not ${mode}.`);
    sent.push({ name, trailer: true });
  }
  if (sent.length > 1)
    throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
  plan.checksum = sent[0];
  const algorithm = header(req, 'x-amz-sdk-checksum-algorithm')?.toLowerCase();
  if (algorithm && plan.checksum && algorithm !== plan.checksum.name) {
    throw new S3Error('InvalidRequest', `x-amz-sdk-checksum-algorithm ${algorithm.toUpperCase()} does not name the checksum sent.`);
  }

  const length = header(req, plan.chunked ? 'x-amz-decoded-content-length' : 'content-length');
  if (length !== undefined) {
    if (!/^\d{1,16}$/.test(length)) throw new S3Error('InvalidArgument', 'x-amz-decoded-content-length is not a number.');
    plan.length = Number(length);
    if (plan.length > maxBytes) throw new S3Error('EntityTooLarge', undefined, { ProposedSize: length, MaxSizeAllowed: String(maxBytes) });
  }
  return plan;
}

type Settle = { resolve: (result: BodyResult) => void; reject: (err: unknown) => void };

/** The decoded bytes, digested on the way; aws-chunked framing parsed as a small state machine. */
class BodyDecoder extends Transform {
  private bytes = 0;
  private readonly md5 = createHash('md5');
  private readonly checksum?: Checksum;
  private readonly payloadSha?: Hash;
  private phase: 'size' | 'data' | 'data-end' | 'trailer' | 'done' = 'size';
  private line = '';
  private remaining = 0;
  private crlf = 0;
  private chunkSignature = '';
  private chunkSha: Hash | null = null;
  private previous: string;
  private readonly trailers = new Map<string, string>();
  private trailerSigned = false;

  constructor(
    private readonly plan: Plan,
    private readonly chain: SignatureChain,
    private readonly maxBytes: number,
    private readonly settle: Settle,
  ) {
    super({ readableHighWaterMark: 64 * 1024, writableHighWaterMark: 64 * 1024 });
    this.previous = chain.seed;
    if (plan.checksum) this.checksum = createChecksum(plan.checksum.name);
    if (plan.sha256Hex) this.payloadSha = createHash('sha256');
  }

  override _transform(input: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.plan.chunked) {
      try {
        this.data(input);
        callback();
      } catch (err) {
        callback(err as Error);
      }
      return;
    }
    this.consume(input).then(() => callback(), callback);
  }

  override _flush(callback: TransformCallback): void {
    this.finish().then(
      (result) => {
        this.settle.resolve(result);
        callback();
      },
      (err: Error) => callback(err),
    );
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.settle.reject(err ?? new S3Error('IncompleteBody', 'The body was not read to its end.'));
    callback(err);
  }

  private data(piece: Buffer): void {
    this.bytes += piece.length;
    if (this.bytes > this.maxBytes) throw new S3Error('EntityTooLarge', undefined, { MaxSizeAllowed: String(this.maxBytes) });
    if (this.plan.length !== undefined && this.bytes > this.plan.length) {
      throw new S3Error('IncompleteBody', `The body carries more than the ${this.plan.length} bytes declared.`);
    }
    this.md5.update(piece);
    this.checksum?.update(piece);
    this.payloadSha?.update(piece);
    this.chunkSha?.update(piece);
    this.push(piece);
  }

  private async consume(input: Buffer): Promise<void> {
    let i = 0;
    while (i < input.length && !this.destroyed) {
      if (this.phase === 'size' || this.phase === 'trailer') {
        const newline = input.indexOf(0x0a, i);
        const end = newline < 0 ? input.length : newline + 1;
        this.line += input.toString('latin1', i, end);
        i = end;
        if (this.line.length > MAX_LINE) throw malformed('a chunk header or trailer line is too long.');
        if (newline < 0) continue;
        if (!this.line.endsWith('\r\n')) throw malformed('lines must end with CRLF.');
        const text = this.line.slice(0, -2);
        this.line = '';
        await (this.phase === 'size' ? this.chunkHeader(text) : this.trailerLine(text));
      } else if (this.phase === 'data') {
        const n = Math.min(this.remaining, input.length - i);
        this.data(input.subarray(i, i + n));
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.phase = 'data-end';
      } else if (this.phase === 'data-end') {
        if (input[i] !== (this.crlf === 0 ? 0x0d : 0x0a)) throw malformed('chunk data must be followed by CRLF.');
        i += 1;
        if (++this.crlf === 2) {
          this.crlf = 0;
          if (this.plan.signedChunks) await this.verifyChunk();
          this.phase = 'size';
        }
      } else {
        throw malformed('there are bytes after the final chunk.');
      }
    }
  }

  private async chunkHeader(text: string): Promise<void> {
    const m = /^([0-9a-fA-F]{1,15})(?:;(.*))?$/.exec(text);
    if (!m) throw malformed(`"${text.slice(0, 80)}" is not a chunk header.`);
    const size = parseInt(m[1]!, 16);
    if (this.plan.signedChunks) {
      const signature = /^chunk-signature=([0-9a-f]{64})$/.exec(m[2] ?? '');
      if (!signature) throw malformed('a chunk has no chunk-signature.');
      this.chunkSignature = signature[1]!;
      this.chunkSha = createHash('sha256');
    }
    if (this.bytes + size > this.maxBytes) throw new S3Error('EntityTooLarge', undefined, { MaxSizeAllowed: String(this.maxBytes) });
    if (this.plan.length !== undefined && this.bytes + size > this.plan.length) {
      throw new S3Error('IncompleteBody', `The chunks carry more than the ${this.plan.length} bytes declared.`);
    }
    if (size > 0) {
      this.remaining = size;
      this.phase = 'data';
      return;
    }
    if (this.plan.signedChunks) await this.verifyChunk();
    this.phase = 'trailer';
  }

  private async verifyChunk(): Promise<void> {
    const digest = this.chunkSha!.digest('hex');
    this.chunkSha = null;
    const { longDate, scope } = this.chain;
    await this.verify(['AWS4-HMAC-SHA256-PAYLOAD', longDate, scope, this.previous, EMPTY_SHA256, digest].join('\n'), this.chunkSignature);
    this.previous = this.chunkSignature;
  }

  // Chunk and trailer signatures are HMACs of strings to sign that smithy has no builder for
  // (its event-stream signing is another format); the HMAC itself is smithy's (chain.sign).
  private async verify(stringToSign: string, provided: string): Promise<void> {
    if (!sameHex(await this.chain.sign(stringToSign), provided)) {
      throw new S3Error('SignatureDoesNotMatch', 'The chunk signature we calculated does not match the signature you provided.');
    }
  }

  private async trailerLine(text: string): Promise<void> {
    if (text === '') {
      this.phase = 'done';
      return;
    }
    if (this.trailerSigned) throw malformed('a trailer follows x-amz-trailer-signature.');
    const colon = text.indexOf(':');
    if (colon <= 0) throw malformed(`"${text.slice(0, 80)}" is not a trailer.`);
    const name = text.slice(0, colon).trim().toLowerCase();
    const value = text.slice(colon + 1).trim();
    if (name === 'x-amz-trailer-signature') {
      if (!this.plan.signedChunks || !HEX64.test(value)) throw malformed('unexpected x-amz-trailer-signature.');
      const canonical = [...this.trailers].map(([n, v]) => `${n}:${v}\n`).join('');
      const hash = createHash('sha256').update(canonical).digest('hex');
      await this.verify(['AWS4-HMAC-SHA256-TRAILER', this.chain.longDate, this.chain.scope, this.previous, hash].join('\n'), value);
      this.trailerSigned = true;
      return;
    }
    const expected = this.plan.checksum?.trailer ? `x-amz-checksum-${this.plan.checksum.name}` : null;
    if (name !== expected) throw new S3Error('InvalidRequest', `The trailer ${name} was not declared in x-amz-trailer.`);
    if (this.trailers.has(name)) throw malformed(`the trailer ${name} is sent twice.`);
    this.trailers.set(name, value);
  }

  private async finish(): Promise<BodyResult> {
    const { plan } = this;
    // A body that ends right after its trailers, without the closing empty line, is whole.
    if (plan.chunked && !(this.phase === 'done' || (this.phase === 'trailer' && this.line === ''))) {
      throw new S3Error('IncompleteBody', 'The aws-chunked body ended before its final chunk.');
    }
    if (plan.length !== undefined && this.bytes !== plan.length) {
      throw new S3Error('IncompleteBody', `The body has ${this.bytes} bytes, not the ${plan.length} declared.`);
    }
    if (plan.signedChunks && this.trailers.size > 0 && !this.trailerSigned) {
      throw new S3Error('SignatureDoesNotMatch', 'The trailer has no x-amz-trailer-signature.');
    }
    const md5 = this.md5.digest();
    if (plan.md5 && !md5.equals(plan.md5)) throw new S3Error('BadDigest');
    if (plan.sha256Hex) {
      const computed = this.payloadSha!.digest('hex');
      if (computed !== plan.sha256Hex) {
        throw new S3Error('XAmzContentSHA256Mismatch', undefined, {
          ClientComputedContentSHA256: plan.sha256Hex,
          S3ComputedContentSHA256: computed,
        });
      }
    }
    const checksums: Checksums = {};
    if (plan.checksum) {
      const { name, trailer } = plan.checksum;
      const sent = trailer ? this.trailers.get(`x-amz-checksum-${name}`) : plan.checksum.value;
      if (sent === undefined)
        throw new S3Error('IncompleteBody', `The trailer x-amz-checksum-${name} declared in x-amz-trailer was not sent.`);
      if (!base64Of(sent, CHECKSUM_SIZES[name])) {
        throw new S3Error('BadDigest', `The ${CHECKSUM_LABELS[name]} you specified did not match the calculated checksum.`);
      }
      const computed = (await this.checksum!.digest()).toString('base64');
      if (computed !== sent) {
        throw new S3Error('BadDigest', `The ${CHECKSUM_LABELS[name]} you specified did not match the calculated checksum.`);
      }
      checksums[name] = computed;
    }
    return { bytes: this.bytes, md5, checksums };
  }
}

export function decodeBody(
  req: IncomingMessage,
  auth: Authenticated,
  { maxBytes, checksumHeaders = true }: { maxBytes: number; checksumHeaders?: boolean },
): { stream: Readable; result: Promise<BodyResult> } {
  const plan = planOf(req, auth, maxBytes, checksumHeaders);
  let settle!: Settle;
  const result = new Promise<BodyResult>((resolve, reject) => (settle = { resolve, reject }));
  // Both carry a failure: a consumer may watch either without the other crashing the process.
  result.catch(() => {});
  const decoder = new BodyDecoder(plan, auth.chain, maxBytes, settle);
  decoder.on('error', () => {});
  // The decoder's own failure unpipes it and leaves the request alone, so the surface can
  // still answer with the error; a request that breaks off fails the decoder.
  const broken = (cause?: unknown) => {
    if (!decoder.destroyed && !decoder.writableFinished) {
      decoder.destroy(new S3Error('IncompleteBody', 'The connection closed before the body ended.', {}, {}, { cause }));
    }
  };
  req.on('error', broken);
  req.on('close', () => {
    if (!req.complete) broken();
  });
  req.pipe(decoder);
  return { stream: decoder, result };
}

export async function readSmallBody(
  req: IncomingMessage,
  auth: Authenticated,
  limit: number,
  options: { checksumHeaders?: boolean } = {},
): Promise<Buffer> {
  const { stream, result } = decodeBody(req, auth, { maxBytes: limit, ...options });
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  await result;
  return Buffer.concat(parts);
}
