// Bytes for the upload benchmark, made as they are sent and never held whole.
import crypto from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export const MiB = 1024 * 1024;

/**
 * `size` deterministic pseudo-random bytes in 1 MiB pieces: AES-256-CTR over zeros, keyed by
 * the seed. Random-looking, so neither Kubo nor anything else can compress or deduplicate
 * blocks within the file, and cheap (AES-NI: well over 1 GB/s), so the generator does not
 * limit what is measured. tests/support/content.ts hashes per 64 bytes, about 10x slower,
 * which would weigh on a 1 GiB run on a 2-core machine.
 */
export async function* bytes(size: number, seed: string): AsyncGenerator<Uint8Array> {
  const key = crypto.createHash('sha256').update(seed).digest();
  const cipher = crypto.createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(MiB);
  for (let left = size; left > 0; left -= MiB) {
    yield cipher.update(left >= MiB ? zeros : zeros.subarray(0, left));
  }
}

/** A multipart/form-data body with one part `file`, its bytes streamed from `source`. */
export function multipart(filename: string, source: AsyncIterable<Uint8Array>) {
  const boundary = `----stupabench${crypto.randomBytes(8).toString('hex')}`;
  async function* body(): AsyncGenerator<Uint8Array> {
    yield Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    yield* source;
    yield Buffer.from(`\r\n--${boundary}--\r\n`);
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: body() };
}

/**
 * POSTs a streamed body (chunked) and returns the status and the text answer. node:http with
 * stream.pipeline rather than fetch: fetch reads a streamed body far ahead of the socket
 * (measured in infra/ipfs/kubo.ts: a 512 MiB body held over 500 MB), which would make this
 * process generate the whole GiB up front and spend the shared CPU on GC while it is timed.
 */
export async function postStream(
  url: string,
  headers: Record<string, string>,
  body: AsyncIterable<Uint8Array>,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    pipeline(Readable.from(body), req).catch(reject);
  });
}
