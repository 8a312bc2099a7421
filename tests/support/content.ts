// Content helpers: multipart bodies streamed from generators, deterministic bytes, and the
// CID Kubo itself gives for bytes (its own add with the profile, hash only).
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { parseCid } from '../../infra/ipfs/cid.js';
import { binaryPath } from '../../stack/binaries.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { stack } from './stack.js';

export const kubo = () => createKubo(stack.kuboApiUrl);
export const cluster = () => createClusterClient(stack.clusterApiUrl);

export const MiB = 1024 * 1024;

/** `ipfs add -r --hidden` of a directory on disk, by the stack's Kubo with its profile: the CID a snapshot must equal. */
export async function addTree(dir: string): Promise<string> {
  const port = new URL(stack.kuboApiUrl).port;
  const args = ['--api', `/ip4/127.0.0.1/tcp/${port}`, 'add', '-r', '--hidden', '--pin=false', '-Q', dir];
  const { stdout } = await promisify(execFile)(binaryPath('kubo', 'ipfs'), args, { maxBuffer: 1 << 20 });
  return parseCid(stdout.trim()).v1;
}

/** `size` bytes, the same for the same seed, made in 1 MiB pieces. */
export async function* bytes(size: number, seed = 'stupa'): AsyncGenerator<Uint8Array> {
  let counter = 0;
  for (let left = size; left > 0;) {
    const block = crypto.createHash('sha512').update(`${seed}:${counter++}`).digest();
    const piece = Buffer.alloc(Math.min(MiB, left));
    for (let i = 0; i < piece.length; i += block.length) block.copy(piece, i);
    left -= piece.length;
    yield piece;
  }
}

export async function collect(source: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of source) parts.push(p);
  return Buffer.concat(parts);
}

/** The CID Kubo gives the bytes by its own configuration (the unixfs-v1-2025 profile). */
export async function kuboCid(source: () => AsyncIterable<Uint8Array>): Promise<string> {
  const added = await kubo().add(source(), { onlyHash: true, pin: false });
  return added.cid.toString();
}

/** A multipart/form-data body whose file part is streamed from `file.source`. */
export function multipart(fields: Record<string, string>, file?: { name: string; type?: string; source: AsyncIterable<Uint8Array> }) {
  const boundary = `----stupa${crypto.randomBytes(8).toString('hex')}`;
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const [k, v] of Object.entries(fields)) {
      yield Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
    }
    if (file) {
      yield Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: ${file.type ?? 'application/octet-stream'}\r\n\r\n`,
      );
      yield* file.source;
      yield Buffer.from('\r\n');
    }
    yield Buffer.from(`--${boundary}--\r\n`);
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: body() };
}

/** POSTs a streamed body with fetch. */
export async function postStream(url: string, key: string, contentType: string, body: AsyncIterable<Uint8Array>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'X-Api-Key': key, 'Content-Type': contentType },
    body: Readable.toWeb(Readable.from(body)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text };
}
