// One HTTP call on node:http, answered with its status and text: how the Kubo and Cluster
// adapters call the endpoints they do not reach through a client library. node:http rather
// than fetch: a streamed request body honours backpressure (infra/ipfs/kubo.ts), and a call costs
// less CPU (measured: 0.26-0.50 ms against fetch's 0.74-1.19, client and a local server together),
// which counts where every upload makes one (core/hold-sync.ts).
import http from 'node:http';
import https from 'node:https';
import readline from 'node:readline';

export interface CallOptions {
  method: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Writes the body and ends the request; without it the request is sent with none. */
  send?: (req: http.ClientRequest, fail: (err: Error) => void) => void;
}

export function httpCall(url: URL, { method, headers, signal, send }: CallOptions): Promise<{ status: number; text: string }> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(url, { method, headers, signal }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (send) send(req, reject);
    else req.end();
  });
}

/**
 * The lines of a GET's answer, as they arrive: for lists a server streams (Cluster's NDJSON),
 * so that a caller holds one line at a time however long the list. A status other than 2xx
 * throws with the answer's text.
 */
export async function* httpLines(url: URL, signal?: AbortSignal): AsyncGenerator<string> {
  const transport = url.protocol === 'https:' ? https : http;
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = transport.request(url, { method: 'GET', signal }, resolve);
    req.on('error', reject);
    req.end();
  });
  if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) >= 300) {
    const parts: Buffer[] = [];
    for await (const part of res) parts.push(part as Buffer);
    throw new Error(`GET ${url.pathname}: ${res.statusCode} ${Buffer.concat(parts).toString('utf8')}`.trim());
  }
  const lines = readline.createInterface({ input: res, crlfDelay: Infinity });
  try {
    for await (const line of lines) if (line.trim() !== '') yield line;
  } finally {
    lines.close();
    res.destroy();
  }
}
