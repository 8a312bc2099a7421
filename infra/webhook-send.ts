// Sending one webhook attempt: the receiver's address checked at the moment of connecting, the
// body signed per Standard Webhooks (the `standardwebhooks` library, so receivers verify with
// the same library in any language), and the answer cut to a few hundred characters.
//
// The address check is in the socket's DNS lookup (the `lookup` option of node:http(s)), not
// before the request: the address the name resolves to when the connection is made is the one
// checked and the one connected to, so a name that resolves to a public address when checked
// and to a private one a moment later (DNS rebinding) cannot pass. Connections are kept alive
// between attempts (a new TLS connection per delivery cost the worker most of its CPU per
// delivery, measured by npm run bench); a kept connection stays with the address checked when
// it was made.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Webhook } from 'standardwebhooks';
import { WEBHOOK_CONNECT_TIMEOUT_MS, WEBHOOK_RESPONSE_KEEP_CHARS, WEBHOOK_TIMEOUT_MS } from './constants.js';

/** Why an address may not receive webhooks, or null when it may (a public unicast address). */
export function refusedAddress(address: string): string | null {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  const range = ip.range();
  // 'unicast' is every address ipaddr.js does not place in a special range: loopback, private,
  // link-local (where cloud metadata services answer, 169.254.169.254), unique-local, carrier-
  // grade NAT, multicast, reserved and unspecified ones are all named ranges.
  return range === 'unicast' ? null : `${address} is a ${range} address`;
}

export class AddressRefused extends Error {}

/** The host's addresses, each checked; throws AddressRefused naming the first refused one. */
export async function checkHost(host: string): Promise<void> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = ipaddr.isValid(bare) ? [bare] : (await dns.promises.lookup(bare, { all: true })).map((a) => a.address);
  for (const address of addresses) {
    const why = refusedAddress(address);
    if (why) throw new AddressRefused(`${host} resolves to ${why}; webhooks go to public addresses only`);
  }
}

/** dns.lookup for a socket, refusing non-public addresses unless `allowPrivate`. */
function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      const refused = allowPrivate ? undefined : list.map((a) => refusedAddress(a.address)).find(Boolean);
      if (refused) return callback(new AddressRefused(`${hostname} resolves to ${refused}; webhooks go to public addresses only`), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** Kept-alive connections, apart for the two address rules. Idle ones close after 4 s, before
 * a receiver's usual 5 s keep-alive would close them under a request. */
const agents = new Map<string, http.Agent>();
function agentFor(protocol: string, allowPrivate: boolean): http.Agent {
  const key = `${protocol}${allowPrivate}`;
  let agent = agents.get(key);
  if (!agent) {
    const options = { keepAlive: true, timeout: 4_000 };
    agent = protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
    agents.set(key, agent);
  }
  return agent;
}

export interface SendInput {
  url: string;
  /** `whsec_…` */
  secret: string;
  eventId: string;
  body: string;
  allowPrivate: boolean;
}

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  response: string | null;
}

/** One attempt: 2xx is delivered; anything else, or no answer within the timeouts, is not. A kept
 * connection that the receiver closed as it was reused is replaced once (`fresh`). */
export function sendWebhook(input: SendInput, fresh = false): Promise<SendResult> {
  const started = performance.now();
  const url = new URL(input.url);
  const timestamp = new Date();
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'Stupa-Webhooks/1',
    'webhook-id': input.eventId,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(input.secret).sign(input.eventId, timestamp, input.body),
    'content-length': String(Buffer.byteLength(input.body)),
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: Omit<SendResult, 'latencyMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(total);
      req.destroy();
      resolve({ ...result, latencyMs: Math.round(performance.now() - started) });
    };
    const fail = (error: string) => done({ ok: false, statusCode: null, error, response: null });
    const req = client.request(url, {
      method: 'POST',
      headers,
      lookup: guardedLookup(input.allowPrivate),
      agent: fresh ? false : agentFor(url.protocol, input.allowPrivate),
    });
    const total = setTimeout(() => fail(`no complete answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`), WEBHOOK_TIMEOUT_MS);
    req.on('socket', (socket) => {
      const connect = setTimeout(() => fail(`could not connect within ${WEBHOOK_CONNECT_TIMEOUT_MS / 1000} s`), WEBHOOK_CONNECT_TIMEOUT_MS);
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connect));
      socket.once('close', () => clearTimeout(connect));
    });
    req.on('error', (err) => {
      if (req.reusedSocket && !fresh && !settled) {
        settled = true;
        clearTimeout(total);
        resolve(sendWebhook(input, true));
      } else fail(err.message);
    });
    req.on('response', (res) => {
      const statusCode = res.statusCode ?? 0;
      let kept = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        kept += chunk;
        // Only the start of the answer is kept; the rest is not read.
        if (kept.length >= WEBHOOK_RESPONSE_KEEP_CHARS) finish();
      });
      res.on('end', () => finish());
      res.on('error', () => finish());
      function finish() {
        const ok = statusCode >= 200 && statusCode < 300;
        done({ ok, statusCode, error: ok ? null : `answered ${statusCode}`, response: kept.slice(0, WEBHOOK_RESPONSE_KEEP_CHARS) || null });
      }
    });
    req.end(input.body);
  });
}
