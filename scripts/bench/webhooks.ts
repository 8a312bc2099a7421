// Webhooks: two figures.
// 1. Deliveries per second: one account with ENDPOINTS endpoints on a fast receiver on
//    loopback, all taking `upload.created`; UPLOADS small uploads at CLIENTS clients make
//    UPLOADS × ENDPOINTS events (a burst of 10,000 by default), timed from the first upload
//    until the receiver has every one (each verified to carry a Standard Webhooks signature).
// 2. The API's request rate with webhooks on against off: rounds alternating between an account
//    whose every upload is an event for ENDPOINTS_ON endpoint (as most accounts have one) and one
//    with none, the same small uploads at the same concurrency, waiting between rounds until
//    every delivery has arrived (the sending is the round's load, not the next one's). Goal:
//    ≥ 0.95 (the issue's). On two shared cores the deliveries' own writes and sends share the
//    CPU with the uploads; the CPU per upload of each process is printed per round. Then the same
//    rounds with the delivery side (worker, Temporal) on a core apart from the API and FerretDB,
//    as in a deployment: what recording the events costs the API itself.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { readStackFile } from '../../stack/stack-file.js';
import { createBenchUser, cpuTicks, pin, TICKS_PER_SECOND } from './children.js';
import type { BenchContext } from './harness.js';
import { metadata, runClients, CLIENTS } from './small.js';
import { showSpread, spread, type Spread } from './spread.js';

const ENDPOINTS = 100;
const UPLOADS = 100;
const ENDPOINTS_ON = 1;
const RATE_UPLOADS = 500;
const RATE_ROUNDS = 5;
const GOAL = 0.95;

export interface WebhooksResult {
  deliveries: number;
  deliveriesPerSecond: number;
  /** Seconds the burst's uploads took, and until the last delivery. */
  uploadSeconds: number;
  deliveredSeconds: number;
  /** CPU ms per delivery: worker, API (recording), FerretDB and Temporal. */
  cpuMsPerDelivery: Record<string, number>;
  on: Spread;
  off: Spread;
  ratio: Spread;
  /** The same rounds with the worker and Temporal on CPU 1, the API and FerretDB on CPU 0; null
   * where taskset or a second core is missing. */
  split: { on: Spread; off: Spread; ratio: Spread } | null;
  badSignatures: number;
}

function startReceiver(secrets: Map<string, string>) {
  let received = 0;
  let bad = 0;
  const seen = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const secret = secrets.get(req.url ?? '');
      try {
        new Webhook(secret!).verify(Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>);
      } catch {
        bad++;
      }
      const id = `${req.url} ${String(req.headers['webhook-id'])}`;
      if (!seen.has(id)) {
        seen.add(id);
        received++;
      }
      res.end();
    });
  });
  return {
    received: () => received,
    bad: () => bad,
    listen: () => new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port))),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function call(ctx: BenchContext, apiKey: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${ctx.apiUrl}${path}`, {
      method,
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.ok) return JSON.parse(text) as Record<string, unknown>;
    if (res.status !== 503 || attempt === 10) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 1000 * Number(res.headers.get('retry-after') ?? 1)));
  }
}

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function benchWebhooks(ctx: BenchContext, say: (line: string) => void): Promise<WebhooksResult> {
  const secrets = new Map<string, string>();
  const receiver = startReceiver(secrets);
  const port = await receiver.listen();
  try {
    const endpoints = async (apiKey: string, label: string, count: number) => {
      for (let i = 0; i < count; i++) {
        const path = `/${label}/${i}`;
        const made = await call(ctx, apiKey, 'POST', '/webhooks', { url: `http://127.0.0.1:${port}${path}`, events: ['upload.created'] });
        secrets.set(path, made.secret as string);
      }
    };
    const uploads = async (apiKey: string, count: number, seed: string) =>
      runClients(count, async (i) => {
        await call(ctx, apiKey, 'POST', '/upload/new', { content: metadata(seed, i), name: `${seed}-${i}.json` });
      });

    // 1. The burst.
    const burst = await createBenchUser(ctx.env);
    await endpoints(burst.apiKey, 'burst', ENDPOINTS);
    say(`webhooks: ${ENDPOINTS} endpoints made; ${UPLOADS} uploads at ${CLIENTS} clients make ${UPLOADS * ENDPOINTS} deliveries`);
    const stack = readStackFile(ctx.dataDir).pids ?? {};
    const pids: Record<string, number | undefined> = {
      worker: ctx.worker.pid,
      api: ctx.api.pid,
      ferretdb: stack.ferretdb,
      temporal: stack.temporal,
    };
    // And this process: the clients and the receiver (verifying every signature), which share
    // the cores with the service here and would not in a deployment.
    const own = () => {
      const { user, system } = process.cpuUsage();
      return ((user + system) / 1e6) * TICKS_PER_SECOND;
    };
    const ticks = () => ({ ...Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuTicks(pid) : 0])), bench: own() });
    const perOne = (from: Record<string, number>, count: number) =>
      Object.fromEntries(Object.entries(ticks()).map(([k, t]) => [k, (((t - from[k]!) / TICKS_PER_SECOND) * 1000) / count]));
    const before = ticks();
    const t = performance.now();
    const uploadSeconds = await uploads(burst.apiKey, UPLOADS, `burst-${Date.now()}`);
    const expected = UPLOADS * ENDPOINTS;
    await waitFor(() => receiver.received() >= expected, 600_000, `${expected} deliveries`);
    const deliveredSeconds = (performance.now() - t) / 1000;
    const cpuMsPerDelivery = perOne(before, expected);
    say(`webhooks: ${expected} deliveries in ${deliveredSeconds.toFixed(1)} s (uploads took ${uploadSeconds.toFixed(1)} s)`);

    // 2. The API's rate, on and off, once the burst's writes have settled.
    await new Promise((r) => setTimeout(r, 5_000));
    const on = await createBenchUser(ctx.env);
    const off = await createBenchUser(ctx.env);
    await endpoints(on.apiKey, 'on', ENDPOINTS_ON);
    const rateRounds = async (label: string) => {
      const rates = { on: [] as number[], off: [] as number[], ratio: [] as number[] };
      for (let round = 0; round < RATE_ROUNDS; round++) {
        const order = round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
        const rate: Record<string, number> = {};
        for (const which of order) {
          const target = receiver.received() + (which === 'on' ? RATE_UPLOADS * ENDPOINTS_ON : 0);
          const from = ticks();
          const seconds = await uploads((which === 'on' ? on : off).apiKey, RATE_UPLOADS, `${which}-${label}-${round}-${Date.now()}`);
          rate[which] = RATE_UPLOADS / seconds;
          await waitFor(() => receiver.received() >= target, 600_000, `round ${round}'s deliveries`);
          const cpu = Object.entries(perOne(from, RATE_UPLOADS)).map(([k, v]) => `${k} ${v.toFixed(2)}`);
          say(`webhooks: ${label} round ${round + 1} ${which}: cpu ms per upload (deliveries included): ${cpu.join(', ')}`);
        }
        rates.on.push(rate.on!);
        rates.off.push(rate.off!);
        rates.ratio.push(rate.on! / rate.off!);
        say(`webhooks: ${label} round ${round + 1}: uploads/s with webhooks ${rate.on!.toFixed(1)}, without ${rate.off!.toFixed(1)}`);
      }
      return { on: spread(rates.on), off: spread(rates.off), ratio: spread(rates.ratio) };
    };
    const shared = await rateRounds('shared cores');
    // The same with the delivery side (worker, Temporal) on one core and the API and FerretDB on
    // the other, as a deployment runs workers apart: what recording the events costs the API.
    let split: WebhooksResult['split'] = null;
    const apart = [pids.worker, pids.temporal].filter((pid): pid is number => pid !== undefined);
    const near = [pids.api, pids.ferretdb].filter((pid): pid is number => pid !== undefined);
    if (apart.every((pid) => pin(pid, '1')) && near.every((pid) => pin(pid, '0'))) {
      try {
        split = await rateRounds('split cores');
      } finally {
        for (const pid of [...apart, ...near]) pin(pid, '0-1');
      }
    }
    return {
      deliveries: expected,
      deliveriesPerSecond: expected / deliveredSeconds,
      uploadSeconds,
      deliveredSeconds,
      cpuMsPerDelivery,
      ...shared,
      split,
      badSignatures: receiver.bad(),
    };
  } finally {
    await receiver.close();
  }
}

export function webhooksLines(r: WebhooksResult): string[] {
  const cpu = Object.entries(r.cpuMsPerDelivery)
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(', ');
  return [
    `bench: webhooks       ${r.deliveries.toLocaleString('en')} deliveries to ${ENDPOINTS} endpoints (loopback receiver): ` +
      `${Math.round(r.deliveriesPerSecond)}/s, all in ${r.deliveredSeconds.toFixed(1)} s (the burst's uploads took ${r.uploadSeconds.toFixed(1)} s)  ` +
      `[cpu ms per delivery: ${cpu}]`,
    `bench: webhooks rate  1 KiB uploads/s at ${CLIENTS} clients, ${ENDPOINTS_ON} endpoints per upload vs none: ${showSpread(r.on, 1)} vs ` +
      `${showSpread(r.off, 1)}  ratio ${showSpread(r.ratio, 2)} (goal >= ${GOAL}: ${r.ratio.median >= GOAL ? 'met' : 'MISSED'})  ` +
      `[${RATE_ROUNDS} rounds of ${RATE_UPLOADS}, alternating]`,
    r.split
      ? `bench: webhooks rate, worker and Temporal on CPU 1, API and FerretDB on CPU 0: ${showSpread(r.split.on, 1)} vs ` +
        `${showSpread(r.split.off, 1)}  ratio ${showSpread(r.split.ratio, 2)} (goal >= ${GOAL}: ${r.split.ratio.median >= GOAL ? 'met' : 'MISSED'})`
      : 'bench: webhooks rate on split cores: not measured (no taskset or one CPU)',
  ];
}

export const webhooksBroken = (r: WebhooksResult): string[] =>
  r.badSignatures > 0 ? [`${r.badSignatures} webhook deliveries did not verify with the standardwebhooks library`] : [];
