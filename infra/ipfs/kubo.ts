// Kubo through kubo-rpc-client (its RPC API, /api/v0).
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { create, type KuboRPCClient } from 'kubo-rpc-client';
import { httpCall } from '../http-call.js';

export type Kubo = KuboRPCClient;

export function createKubo(apiUrl: string): Kubo {
  return create({ url: new URL('/api/v0', apiUrl) });
}

/** The size of content: a file's bytes, or a directory's cumulative size (blocks included). */
export async function contentSize(apiUrl: string, cid: string, signal?: AbortSignal): Promise<number> {
  return (await contentSizes(apiUrl, cid, signal)).size;
}

/**
 * `size` as contentSize; `dagSize`, the cumulative size of its blocks, is what a directory
 * linking the content records as the link's size (infra/ipfs/unixfs.ts). Both come from the root
 * block: `offline` answers from the one Kubo has, or fails. `files/stat` on node:http
 * rather than kubo-rpc-client's `files.stat`, whose fetch was the largest part of a pin's
 * activity in the worker's profile (infra/http-call.ts has the measure of the two).
 */
export async function contentSizes(
  apiUrl: string,
  cid: string,
  signal?: AbortSignal,
  options: { offline?: boolean } = {},
): Promise<{ size: number; dagSize: number }> {
  const url = new URL('/api/v0/files/stat', apiUrl);
  url.searchParams.set('arg', `/ipfs/${cid}`);
  // Kubo's global flag: only the blocks it has, an error at once for one it would have to fetch
  // (measured on 0.42: 12 ms, where the same stat online waits for the network).
  if (options.offline) url.searchParams.set('offline', 'true');
  const { status, text } = await httpCall(url, { method: 'POST', signal });
  let stat: { Type?: string; Size?: number; CumulativeSize?: number; Message?: string };
  try {
    stat = JSON.parse(text) as typeof stat;
  } catch {
    throw new KuboError(status, text);
  }
  if (status !== 200 || typeof stat.CumulativeSize !== 'number') throw new KuboError(status, stat.Message ?? text);
  const dagSize = stat.CumulativeSize;
  return { size: stat.Type === 'directory' ? dagSize : Number(stat.Size), dagSize };
}

/** Throws unless Kubo answers `id` within `timeoutMs`. */
export async function checkKubo(kubo: Kubo, timeoutMs: number): Promise<void> {
  await kubo.id({ signal: AbortSignal.timeout(timeoutMs) });
}

/**
 * A source that is a multipart body already, from a file's first byte on (api/rest/uploads):
 * the file ends at the form's delimiter, and Kubo adds the text fields after it as entries of
 * their own, after the file's.
 */
export interface Framed {
  boundary: string;
  /** The source's length in bytes, when known. */
  length?: number;
}

/**
 * POSTs a stream to a Kubo RPC command as the single file of a multipart body and returns
 * Kubo's NDJSON answer, one object a line.
 *
 * Written here instead of kubo-rpc-client's `add`, `dag.import` and `routing.put`, and on
 * node:http rather than fetch: measured on Node 20, a streamed request body sent with fetch
 * (the client's transport) is read far ahead of the socket: a 512 MiB upload held 520-540 MB
 * of buffers, also with forced GC. node:http with a piped stream honours backpressure: 45 MB.
 * A small body costs less CPU too (infra/http-call.ts, infra/ipfs/ipns.ts).
 */
export async function postStream(
  apiUrl: string,
  command: string,
  source: AsyncIterable<Uint8Array> | Uint8Array[],
  options: Record<string, string | number | boolean>,
  signal?: AbortSignal,
  framed?: Framed,
): Promise<Record<string, unknown>[]> {
  const boundary = framed?.boundary ?? `stupa-${crypto.randomUUID()}`;
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  // After a framed source's own closing delimiter, this one is epilogue, which Kubo ignores;
  // it closes a source that has none (the reader refuses such a body, but Kubo must not hang).
  const tail = `\r\n--${boundary}--\r\n`;
  const query = new URLSearchParams(Object.entries(options).map(([k, v]): [string, string] => [k, String(v)]));
  const url = new URL(`/api/v0/${command}?${query}`, apiUrl);
  const headers: Record<string, string> = { 'Content-Type': `multipart/form-data; boundary="${boundary}"` };
  // A known length goes as Content-Length: no chunk framing to write around every chunk.
  if (framed?.length !== undefined) headers['Content-Length'] = String(Buffer.byteLength(head) + framed.length + Buffer.byteLength(tail));
  // A body in memory (an IPNS record, a JSON upload's content) goes as one buffer with its
  // length: the headers and body in one write, where piping it chunked took three (each socket
  // write on loopback was about 0.1 ms of the API's CPU in `npm run bench -- --ipns`).
  let answer: { status: number; text: string };
  if (Array.isArray(source)) {
    const body = Buffer.concat([Buffer.from(head), ...source, Buffer.from(tail)]);
    const sized = { ...headers, 'Content-Length': String(body.length) };
    answer = await httpCall(url, { method: 'POST', signal, headers: sized, send: (req) => req.end(body) });
  } else answer = await sendStream(url, headers, head, tail, source, signal);
  const { status, text } = answer;
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const objects = lines.map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return { Message: l };
    }
  });
  // An error, before or after the answer started, comes as an object with `Message`.
  const failure = objects.find((o) => typeof o.Message === 'string' && o.Type === 'error') ?? (status === 200 ? undefined : objects[0]);
  if (failure || status !== 200) throw new KuboError(status, String(failure?.Message ?? text));
  return objects;
}

/** postStream's body from a stream, chunked: piped as it is, with no promise per chunk as an
 * async iterable would cost. */
function sendStream(
  url: URL,
  headers: Record<string, string>,
  head: string,
  tail: string,
  source: AsyncIterable<Uint8Array>,
  signal?: AbortSignal,
): Promise<{ status: number; text: string }> {
  const input = source instanceof Readable ? source : Readable.from(source);
  return httpCall(url, {
    method: 'POST',
    signal,
    headers,
    send(req, fail) {
      req.write(head);
      input.on('error', (err) => {
        req.destroy(err);
        fail(err);
      });
      input.on('end', () => req.end(tail));
      input.pipe(req, { end: false });
    },
  });
}

/**
 * Adds a stream as one UnixFS file; returns the root CID, the cumulative size of its blocks,
 * and how many entries Kubo added (1, and a framed source's fields after it).
 */
export async function addStream(
  apiUrl: string,
  source: AsyncIterable<Uint8Array> | Uint8Array[],
  options: Record<string, string | number | boolean>,
  signal?: AbortSignal,
  framed?: Framed,
): Promise<{ cid: string; dagSize: number; entries: number }> {
  const objects = await postStream(apiUrl, 'add', source, { ...options, progress: false, quieter: true }, signal, framed);
  const { Hash: hash, Size: size } = objects[0] ?? {};
  if (typeof hash !== 'string') throw new KuboError(200, 'no CID in the answer');
  return { cid: hash, dagSize: Number(size), entries: objects.length };
}

/** Imports a CAR stream, pinning its roots; returns the root CIDs. */
export async function importCarStream(
  apiUrl: string,
  source: AsyncIterable<Uint8Array> | Uint8Array[],
  signal?: AbortSignal,
): Promise<string[]> {
  const objects = await postStream(apiUrl, 'dag/import', source, { 'pin-roots': true }, signal);
  return objects.flatMap((o) => {
    const root = o.Root as { Cid?: { '/': string }; PinErrorMsg?: string } | undefined;
    if (root?.PinErrorMsg) throw new KuboError(200, root.PinErrorMsg);
    return root?.Cid?.['/'] ? [root.Cid['/']] : [];
  });
}

export class KuboError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(`kubo answered ${status}: ${message.slice(0, 300)}`);
    this.name = 'KuboError';
  }
}

/** The node's swarm addresses, each ending in /p2p/<its peer ID>, as it announces them. */
export async function peerAddresses(kubo: Kubo, signal?: AbortSignal): Promise<string[]> {
  const id = await kubo.id({ signal });
  const peer = id.id.toString();
  return id.addresses.map((a) => {
    const text = a.toString();
    return text.includes('/p2p/') ? text : `${text}/p2p/${peer}`;
  });
}
