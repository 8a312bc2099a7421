// The edge (stack/edge.ts): reads through an account's gateway at the edge (Caddy asks
// the API for the access decision, then serves the bytes from Kubo's gateway) against the same
// reads from Kubo's gateway directly, on the same machine, every access check on.
// 1. 1 GiB read whole, EDGE_ROUNDS rounds each way alternating which goes first, on shared
//    cores; each path's MB/s is its bytes over its summed time. Goal >= 0.8 of Kubo's. CPU
//    seconds a GiB costs the edge (goal <= 0.5), the API (goal ~0) and Kubo.
// 2. The same with Kubo on a core of its own (taskset: Kubo's threads on CPU 0; the edge, the
//    API and this reader on CPU 1), as a deployment runs them on separate machines. Goal >= 0.95.
// 3. 4 KiB reads under CONNECTIONS clients (autocannon), LOAD_ROUNDS rounds of LOAD_SECONDS
//    each way. Goal >= 1.0 of Kubo's req/s.
// Checked, not timed: the bytes hash to those uploaded; content the account does not hold is
// 410 at the edge (Kubo has it); the bytes the API metered from the edge's reports are the
// bytes read through the edge (plus 4 KiB answers in flight when a load pass stopped).
import crypto from 'node:crypto';
import { startEdge } from '../../stack/edge.js';
import { freePorts } from '../../stack/ports.js';
import { readStackFile } from '../../stack/stack-file.js';
import { bytes, MiB, multipart, postStream } from './content.js';
import { cpuTicks, pin, TICKS_PER_SECOND } from './children.js';
import {
  awaitPinned,
  CONNECTIONS,
  figures,
  load,
  LOAD_ROUNDS,
  LOAD_SECONDS,
  meteredBytes,
  METER_ROUNDING_BYTES,
  read,
  READ_SIZE,
  SMALL_SIZE,
  upload,
  type LoadFigures,
  type Pass,
} from './gateway.js';
import type { BenchContext } from './harness.js';

export const EDGE_ROUNDS = 5;

export interface EdgeResult {
  shared: { edgeMBps: number; kuboMBps: number; rounds: { edge: number; kubo: number }[] };
  /** Null where taskset or a second core is missing. */
  pinned: { edgeMBps: number; kuboMBps: number; rounds: { edge: number; kubo: number }[] } | null;
  /** CPU seconds a GiB read through the edge (shared cores): the edge, the API, Kubo; and Kubo's own a GiB read directly. */
  cpuPerGiB: { edge: number; api: number; kubo: number; kuboDirect: number };
  small: { edge: LoadFigures; kubo: LoadFigures };
  sameBytes: boolean;
  refusesUnheld: boolean;
  metered: number;
  readThrough: number;
  unfinished: number;
}

export async function benchEdge(ctx: BenchContext, say: (line: string) => void): Promise<EdgeResult> {
  const seed = `bench-edge-${Date.now()}`;
  const kuboGatewayUrl = ctx.endpoints.kuboGatewayUrl;
  if (!kuboGatewayUrl) throw new Error("the stack reported no Kubo gateway: the edge bench needs Kubo's own gateway");
  const [apiPort, gatewayPort, s3Port] = await freePorts(3);
  const host = (url: string) => new URL(url).host;
  const edge = await startEdge({
    dataDir: ctx.dataDir,
    host: '127.0.0.1',
    ports: { api: apiPort!, gateway: gatewayPort!, s3: s3Port! },
    apis: [{ api: host(ctx.apiUrl), gateway: host(ctx.gatewayUrl), s3: `127.0.0.1:${ctx.env.S3_PORT}` }],
    kuboGateways: [host(kuboGatewayUrl)],
    secret: ctx.env.EDGE_SECRET!,
    reports: `127.0.0.1:${ctx.env.EDGE_REPORT_PORT}`,
    signal: ctx.signal,
  });
  ctx.track(() => edge.stop());
  const edgePid = edge.process.pid;
  const apiPid = ctx.api.pid!;
  const kuboPid = readStackFile(ctx.dataDir).pids?.kubo;
  if (!kuboPid) throw new Error('the stack file names no Kubo pid');
  const { gatewaySlug } = (await (await fetch(`${ctx.apiUrl}/user/profile`, { headers: { 'X-Api-Key': ctx.user.apiKey } })).json()) as {
    gatewaySlug: string;
  };
  const headers = { Host: `${gatewaySlug}.localhost:${gatewayPort}` };
  const through = (cid: string) => `http://127.0.0.1:${gatewayPort}/ipfs/${cid}`;
  const direct = (cid: string) => `${kuboGatewayUrl}/ipfs/${cid}`;

  say('edge: uploading 1 GiB and 4 KiB as the bench user');
  const big = await upload(ctx, READ_SIZE, `${seed}-big`);
  const small = await upload(ctx, SMALL_SIZE, `${seed}-small`);
  await awaitPinned(ctx, big.cid);
  await awaitPinned(ctx, small.cid);

  const form = multipart('unheld.bin', bytes(SMALL_SIZE, `${seed}-unheld`));
  const added = await postStream(
    `${ctx.endpoints.kuboApiUrl}/api/v0/add?cid-version=1&raw-leaves=true&pin=false`,
    { 'Content-Type': form.contentType },
    form.body,
  );
  const other = (JSON.parse(added.text.trim().split('\n').pop()!) as { Hash: string }).Hash;
  const refusesUnheld = (await read(through(other), headers)).status === 410 && (await read(direct(other), {})).status === 200;

  const sums = { edge: crypto.createHash('sha256'), kubo: crypto.createHash('sha256') };
  const checked = { edge: await read(through(big.cid), headers, sums.edge), kubo: await read(direct(big.cid), {}, sums.kubo) };
  const sameBytes = checked.edge.status === 200 && sums.edge.digest('hex') === big.sha256 && sums.kubo.digest('hex') === big.sha256;
  say(
    `edge: checked reads: edge ${checked.edge.status}, kubo ${checked.kubo.status}; ${sameBytes ? 'both the uploaded bytes' : 'NOT the uploaded bytes'}`,
  );
  let readThrough = checked.edge.bytes;

  const mb = READ_SIZE / MiB;
  const ticks = { edge: 0, api: 0, kubo: 0, kuboDirect: 0 };
  /** EDGE_ROUNDS rounds each way, alternating; CPU counted when `count`. */
  async function rounds(label: string, count: boolean) {
    const seconds = { edge: 0, kubo: 0 };
    const each: { edge: number; kubo: number }[] = [];
    for (let round = 0; round < EDGE_ROUNDS; round++) {
      const order = round % 2 === 0 ? (['kubo', 'edge'] as const) : (['edge', 'kubo'] as const);
      const took = { edge: 0, kubo: 0 };
      for (const path of order) {
        ctx.signal.throwIfAborted();
        const before = { edge: cpuTicks(edgePid), api: cpuTicks(apiPid), kubo: cpuTicks(kuboPid!) };
        const r = path === 'edge' ? await read(through(big.cid), headers) : await read(direct(big.cid), {});
        if (r.status !== 200 || r.bytes !== READ_SIZE) throw new Error(`${path} read answered ${r.status} with ${r.bytes} bytes`);
        if (path === 'edge') readThrough += r.bytes;
        if (count && path === 'edge') {
          ticks.edge += cpuTicks(edgePid) - before.edge;
          ticks.api += cpuTicks(apiPid) - before.api;
          ticks.kubo += cpuTicks(kuboPid!) - before.kubo;
        } else if (count) ticks.kuboDirect += cpuTicks(kuboPid!) - before.kubo;
        took[path] = r.seconds;
        seconds[path] += r.seconds;
      }
      each.push({ edge: mb / took.edge, kubo: mb / took.kubo });
      say(
        `edge: ${label} round ${round + 1} of ${EDGE_ROUNDS} (${order[0]} first): edge ${(mb / took.edge).toFixed(1)} MB/s, kubo ${(mb / took.kubo).toFixed(1)} MB/s`,
      );
    }
    return { edgeMBps: (EDGE_ROUNDS * mb) / seconds.edge, kuboMBps: (EDGE_ROUNDS * mb) / seconds.kubo, rounds: each };
  }
  const shared = await rounds('shared cores', true);
  const perGiB = (t: number) => t / TICKS_PER_SECOND / EDGE_ROUNDS;
  const cpuPerGiB = { edge: perGiB(ticks.edge), api: perGiB(ticks.api), kubo: perGiB(ticks.kubo), kuboDirect: perGiB(ticks.kuboDirect) };
  say(
    `edge: CPU s per GiB through the edge: edge ${cpuPerGiB.edge.toFixed(2)}, api ${cpuPerGiB.api.toFixed(2)}, kubo ${cpuPerGiB.kubo.toFixed(2)}; ` +
      `kubo read directly ${cpuPerGiB.kuboDirect.toFixed(2)}`,
  );

  // Kubo alone on CPU 0; the edge, the API and this reader on CPU 1.
  let pinned: EdgeResult['pinned'] = null;
  const others = [edgePid, apiPid, process.pid];
  if (pin(kuboPid, '0') && others.every((pid) => pin(pid, '1'))) {
    try {
      pinned = await rounds('Kubo on CPU 0, the rest on CPU 1', false);
    } finally {
      for (const pid of [kuboPid, ...others]) pin(pid, '0-1');
    }
  } else say('edge: taskset or a second CPU is missing: no pinned rounds');

  say(`edge: 4 KiB reads, ${CONNECTIONS} connections, 2 s warm-up each + ${LOAD_ROUNDS} rounds of ${LOAD_SECONDS} s each way`);
  readThrough += SMALL_SIZE * (await load(through(small.cid), headers, 2)).requests;
  await load(direct(small.cid), {}, 2);
  const passes: { edge: Pass[]; kubo: Pass[] } = { edge: [], kubo: [] };
  let unfinished = CONNECTIONS;
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    const order = round % 2 === 0 ? (['kubo', 'edge'] as const) : (['edge', 'kubo'] as const);
    const cpu: Record<string, string> = {};
    for (const path of order) {
      ctx.signal.throwIfAborted();
      const before = [cpuTicks(edgePid), cpuTicks(apiPid), cpuTicks(kuboPid), process.cpuUsage()] as const;
      const pass =
        path === 'edge' ? await load(through(small.cid), headers, LOAD_SECONDS) : await load(direct(small.cid), {}, LOAD_SECONDS);
      const ms = (ticks: number) => ((ticks * 1000) / TICKS_PER_SECOND / pass.requests).toFixed(3);
      const client = process.cpuUsage(before[3]);
      cpu[path] =
        `edge ${ms(cpuTicks(edgePid) - before[0])} api ${ms(cpuTicks(apiPid) - before[1])} kubo ${ms(cpuTicks(kuboPid) - before[2])} ` +
        `client ${((client.user + client.system) / 1000 / pass.requests).toFixed(3)}`;
      if (path === 'edge') {
        readThrough += SMALL_SIZE * pass.requests;
        unfinished += CONNECTIONS;
      }
      passes[path].push(pass);
    }
    const [e, k] = [passes.edge[round]!, passes.kubo[round]!];
    say(
      `edge: 4 KiB round ${round + 1} of ${LOAD_ROUNDS}: edge ${Math.round(e.requests / e.seconds)} req/s (p50 ${e.p50} p99 ${e.p99} ms; ` +
        `CPU ms/request ${cpu.edge}), kubo ${Math.round(k.requests / k.seconds)} req/s (CPU ms/request ${cpu.kubo})`,
    );
  }
  // The edge's reports reach the API at once; the meter writes once a second.
  await new Promise((r) => setTimeout(r, 3000));
  const metered = await meteredBytes(ctx);
  say(
    `edge: metered from the edge's reports ${metered} bytes; read through the edge ${readThrough} (+ up to ${unfinished * SMALL_SIZE} in flight)`,
  );
  return {
    shared,
    pinned,
    cpuPerGiB,
    small: { edge: figures(passes.edge), kubo: figures(passes.kubo) },
    sameBytes,
    refusesUnheld,
    metered,
    readThrough,
    unfinished: unfinished * SMALL_SIZE,
  };
}

const fixed = (n: number, digits = 1) => n.toFixed(digits);
const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

/** The printed figures: ratios against Kubo's gateway read directly, same machine, same run. */
export function edgeLines(r: EdgeResult): string[] {
  const shared = r.shared.edgeMBps / r.shared.kuboMBps;
  const spread = (rounds: { edge: number; kubo: number }[]) => {
    const ratios = rounds.map((x) => x.edge / x.kubo);
    return `${fixed(Math.min(...ratios), 2)}-${fixed(Math.max(...ratios), 2)}`;
  };
  const smallRatio = r.small.edge.requestsPerSecond / r.small.kubo.requestsPerSecond;
  return [
    `bench: edge 1 GiB     shared cores: edge ${fixed(r.shared.edgeMBps)} MB/s  kubo gateway ${fixed(r.shared.kuboMBps)} MB/s  ratio ${fixed(shared, 2)} ` +
      `(rounds ${spread(r.shared.rounds)}; goal >= 0.8: ${verdict(shared >= 0.8)})  cpu s/GiB: edge ${fixed(r.cpuPerGiB.edge, 2)} ` +
      `(goal <= 0.5: ${verdict(r.cpuPerGiB.edge <= 0.5)}), api ${fixed(r.cpuPerGiB.api, 2)}, kubo ${fixed(r.cpuPerGiB.kubo, 2)} (direct ${fixed(r.cpuPerGiB.kuboDirect, 2)})`,
    r.pinned
      ? `bench: edge 1 GiB     Kubo on a core of its own: edge ${fixed(r.pinned.edgeMBps)} MB/s  kubo gateway ${fixed(r.pinned.kuboMBps)} MB/s  ` +
        `ratio ${fixed(r.pinned.edgeMBps / r.pinned.kuboMBps, 2)} (rounds ${spread(r.pinned.rounds)}; goal >= 0.95: ${verdict(r.pinned.edgeMBps / r.pinned.kuboMBps >= 0.95)})`
      : 'bench: edge 1 GiB     Kubo on a core of its own: not measured (no taskset or one CPU)',
    `bench: edge 4 KiB     ${CONNECTIONS} connections: edge ${Math.round(r.small.edge.requestsPerSecond)} req/s p50 ${r.small.edge.p50} ms p99 ${r.small.edge.p99} ms  ` +
      `kubo gateway ${Math.round(r.small.kubo.requestsPerSecond)} req/s  ratio ${fixed(smallRatio, 2)} (goal >= 1.0: ${verdict(smallRatio >= 1)})`,
  ];
}

/** Wrong, not slow. */
export function edgeBroken(r: EdgeResult): string[] {
  return [
    ...(r.sameBytes ? [] : ['a 1 GiB read through the edge did not give the uploaded bytes']),
    ...(r.refusesUnheld ? [] : ['the edge did not answer 410 for content the account does not hold']),
    ...(r.metered < r.readThrough - METER_ROUNDING_BYTES || r.metered > r.readThrough + r.unfinished + METER_ROUNDING_BYTES
      ? [
          `the API metered ${r.metered} bytes from the edge's reports for ${r.readThrough} read through it (+ up to ${r.unfinished} in flight)`,
        ]
      : []),
    ...(r.small.edge.bad > 0 ? [`${r.small.edge.bad} 4 KiB answers through the edge were not 2xx (${r.small.edge.statuses})`] : []),
  ];
}
