// IPNS: two figures.
// 1. Publishes per second through `POST /ipns/publish` against `ipfs name publish
//    --allow-offline` on the same Kubo, LANES names at a time (publishes to one name are
//    ordered, so each lane keeps to its own name on both sides). Both sides end with the record
//    stored in the same Kubo; the service also signs it itself, raises the sequence in MongoDB
//    and runs the name's workflow update.
// 2. How many names one worker keeps republished: `names` names made and published through
//    the API, then every name's job asked to republish at once (the `republish` signal an
//    operator sends) and timed until MongoDB shows every name republished. The CPU each process
//    spent per republish and the history each round adds to a name's workflow give the names
//    a worker core keeps at the default interval (IPNS_REPUBLISH_INTERVAL, 4 h) and the history
//    a name grows by per day. A timer-driven round has a TimerFired event where a signalled
//    one has WorkflowExecutionSignaled and a canceled timer: the same work, one event fewer.
import { Client, Connection } from '@temporalio/client';
import pLimit from 'p-limit';
import { DEFAULT_TEMPORAL_NAMESPACE } from '../../infra/constants.js';
import { openDatabase } from '../../infra/db/index.js';
import { readStackFile } from '../../stack/stack-file.js';
import { ipnsJob, REPUBLISH_SIGNAL } from '../../infra/temporal/contracts/ipns.js';
import { cpuTicks, TICKS_PER_SECOND } from './children.js';
import { apiCall, apiOperations, type BenchContext } from './harness.js';
import { showSpread, spread, type Spread } from './spread.js';

export const LANES = 16;
export const PUBLISHES_PER_LANE = 25;
/** Rounds of publishes on each side; ratios per round, printed as their spread. */
const PUBLISH_ROUNDS = 5;
const DEFAULT_INTERVAL_S = 4 * 3600;

export interface IpnsResult {
  apiPublishes: Spread;
  kuboPublishes: Spread;
  /** API publishes per second over Kubo's, per round. */
  ratio: Spread;
  /** CPU milliseconds each process spent per publish, through the API and through Kubo alone. */
  cpuMsPerPublish: Record<'api' | 'kubo', Record<string, number>>;
  /** MongoDB operations the API sent per publish, by `<method> <collection>`, most first. */
  commands: [string, number][];
  names: number;
  createPerSecond: number;
  firstPublishPerSecond: number;
  republishPerSecond: number;
  /** CPU milliseconds per republish, by process. */
  cpuMsPerRepublish: Record<'worker' | 'temporal' | 'kubo' | 'ferretdb', number>;
  eventsPerRound: number;
  bytesPerRound: number;
}

async function kuboRpc(ctx: BenchContext, path: string): Promise<void> {
  const res = await fetch(new URL(path, ctx.endpoints.kuboApiUrl), { method: 'POST', signal: ctx.signal });
  const text = await res.text();
  if (!res.ok) throw new Error(`kubo ${path}: ${res.status} ${text.slice(0, 200)}`);
}

/** Runs `publish(lane)` PUBLISHES_PER_LANE times in each of LANES lanes; publishes per second. */
async function lanes(publish: (lane: number) => Promise<void>): Promise<number> {
  const t = performance.now();
  await Promise.all(
    Array.from({ length: LANES }, async (_, lane) => {
      for (let i = 0; i < PUBLISHES_PER_LANE; i++) await publish(lane);
    }),
  );
  return (LANES * PUBLISHES_PER_LANE) / ((performance.now() - t) / 1000);
}

async function publishRates(ctx: BenchContext, say: (line: string) => void) {
  // Each lane alternates between two targets of its own, so every publish changes the record
  // and the holds, and no two lanes contend for one content's hold job.
  const targets = await Promise.all(
    Array.from(
      { length: LANES * 2 },
      async (_, i) =>
        (await apiCall<{ cid: string }>(ctx, 'POST', '/upload/new', { content: `ipns bench ${i} ${Date.now()}`, name: `t${i}.txt` })).cid,
    ),
  );
  const apiNames = await Promise.all(
    Array.from(
      { length: LANES },
      async (_, i) => (await apiCall<{ ipnsName: string }>(ctx, 'POST', '/ipns/keys', { name: `lane-${i}` })).ipnsName,
    ),
  );
  for (let i = 0; i < LANES; i++) await kuboRpc(ctx, `/api/v0/key/gen?arg=bench-lane-${i}&type=ed25519`);
  const count = new Array<number>(LANES).fill(0);
  const next = (lane: number) => targets[lane * 2 + (count[lane]!++ % 2)]!;
  // The CPU each process spends per publish, over every round of each side.
  const pids = readStackFile(ctx.dataDir).pids ?? {};
  const watched = { api: ctx.api.pid, ferretdb: pids.ferretdb, temporal: pids.temporal, kubo: pids.kubo, worker: ctx.worker.pid };
  const ticks = () => Object.fromEntries(Object.entries(watched).map(([name, pid]) => [name, pid ? cpuTicks(pid) : 0]));
  const spent = { api: {} as Record<string, number>, kubo: {} as Record<string, number> };
  const commands = new Map<string, number>();
  const measured = async (side: 'api' | 'kubo', run: () => Promise<number>) => {
    const sentBefore = side === 'api' ? await apiOperations(ctx.apiUrl) : undefined;
    const before = ticks();
    const rate = await run();
    const after = ticks();
    for (const name of Object.keys(watched)) spent[side][name] = (spent[side][name] ?? 0) + after[name]! - before[name]!;
    if (sentBefore)
      for (const [k, n] of await apiOperations(ctx.apiUrl)) commands.set(k, (commands.get(k) ?? 0) + n - (sentBefore.get(k) ?? 0));
    return rate;
  };
  const kuboSide = () =>
    measured('kubo', () =>
      lanes((lane) => kuboRpc(ctx, `/api/v0/name/publish?arg=/ipfs/${next(lane)}&key=bench-lane-${lane}&allow-offline=true`)),
    );
  const apiSide = () =>
    measured('api', () =>
      lanes(async (lane) => void (await apiCall(ctx, 'POST', '/ipns/publish', { ipnsName: apiNames[lane], cid: next(lane) }))),
    );
  const api: number[] = [];
  const kubo: number[] = [];
  for (let round = 0; round < PUBLISH_ROUNDS; round++) {
    // Which side goes first alternates: neither always meets a machine the other warmed.
    if (round % 2 === 0) kubo.push(await kuboSide());
    api.push(await apiSide());
    if (round % 2 === 1) kubo.push(await kuboSide());
    say(
      `ipns publish round ${round + 1}: api ${api[round]!.toFixed(1)}/s, kubo ${kubo[round]!.toFixed(1)}/s, ratio ${(api[round]! / kubo[round]!).toFixed(2)}`,
    );
  }
  const publishes = PUBLISH_ROUNDS * LANES * PUBLISHES_PER_LANE;
  const perPublish = (side: 'api' | 'kubo') =>
    Object.fromEntries(Object.entries(spent[side]).map(([name, t]) => [name, ((t / TICKS_PER_SECOND) * 1000) / publishes]));
  return {
    apiPublishes: spread(api),
    kuboPublishes: spread(kubo),
    ratio: spread(api.map((a, i) => a / kubo[i]!)),
    cpuMsPerPublish: { api: perPublish('api'), kubo: perPublish('kubo') },
    commands: [...commands]
      .map(([k, n]): [string, number] => [k, n / publishes])
      .filter(([, each]) => each >= 0.005)
      .sort((a, b) => b[1] - a[1]),
    target: targets[0]!,
  };
}

async function timed<T>(items: T[], concurrency: number, work: (item: T, i: number) => Promise<void>): Promise<number> {
  const limit = pLimit(concurrency);
  const t = performance.now();
  await Promise.all(items.map((item, i) => limit(() => work(item, i))));
  return items.length / ((performance.now() - t) / 1000);
}

export async function benchIpns(ctx: BenchContext, names: number, say: (line: string) => void): Promise<IpnsResult> {
  const rates = await publishRates(ctx, say);

  say(`ipns names: making and publishing ${names.toLocaleString('en')} names, ${LANES} at a time`);
  const made: string[] = Array.from({ length: names }, () => '');
  const createPerSecond = await timed(made, LANES, async (_, i) => {
    made[i] = (await apiCall<{ ipnsName: string }>(ctx, 'POST', '/ipns/keys', { name: `many-${i}` })).ipnsName;
  });
  const firstPublishPerSecond = await timed(made, LANES, async (ipnsName) => {
    await apiCall(ctx, 'POST', '/ipns/publish', { ipnsName, cid: rates.target });
  });
  say(`ipns names: ${createPerSecond.toFixed(1)} made/s, ${firstPublishPerSecond.toFixed(1)} first publishes/s`);

  const connection = await Connection.connect({ address: ctx.endpoints.temporalAddress });
  const db = await openDatabase(ctx.endpoints.mongodbUri);
  try {
    const client = new Client({ connection, namespace: ctx.env.TEMPORAL_NAMESPACE ?? DEFAULT_TEMPORAL_NAMESPACE });
    const sample = client.workflow.getHandle(ipnsJob.workflowId({ ipnsName: made[0]! }));
    const before = await sample.describe();
    const pids = readStackFile(ctx.dataDir).pids ?? {};
    const watched = { worker: ctx.worker.pid, temporal: pids.temporal, kubo: pids.kubo, ferretdb: pids.ferretdb };
    const ticksAt = () => Object.fromEntries(Object.entries(watched).map(([name, pid]) => [name, pid ? cpuTicks(pid) : 0]));
    const ticksBefore = ticksAt();
    const start = Date.now();
    const t = performance.now();
    // Signals go out as fast as the server takes them; the republishes follow as the worker can.
    await timed(made, 32, async (ipnsName) => {
      await client.workflow.getHandle(ipnsJob.workflowId({ ipnsName })).signal(REPUBLISH_SIGNAL);
    });
    const names_ = db.connection.collection('ipns_names');
    for (;;) {
      const done = await names_.countDocuments({ lastRepublishedAt: { $gte: start } });
      if (done >= names) break;
      if (ctx.signal.aborted) throw new Error('aborted');
      await new Promise((r) => setTimeout(r, 500));
    }
    const seconds = (performance.now() - t) / 1000;
    const ticksAfter = ticksAt();
    const after = await sample.describe();
    const cpuMs = (name: keyof typeof watched) => (((ticksAfter[name]! - ticksBefore[name]!) / TICKS_PER_SECOND) * 1000) / names;
    return {
      ...rates,
      names,
      createPerSecond,
      firstPublishPerSecond,
      republishPerSecond: names / seconds,
      cpuMsPerRepublish: { worker: cpuMs('worker'), temporal: cpuMs('temporal'), kubo: cpuMs('kubo'), ferretdb: cpuMs('ferretdb') },
      eventsPerRound: after.historyLength - before.historyLength,
      bytesPerRound: (after.historySize ?? 0) - (before.historySize ?? 0),
    };
  } finally {
    await Promise.all([connection.close(), db.connection.close()]);
  }
}

/** The summary line. */
export function ipnsLines(r: IpnsResult): string[] {
  const workerS = r.cpuMsPerRepublish.worker / 1000;
  const perDay = 86_400 / DEFAULT_INTERVAL_S;
  const cpu = Object.entries(r.cpuMsPerRepublish)
    .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
    .join(', ');
  const perPublish = (side: 'api' | 'kubo') =>
    Object.entries(r.cpuMsPerPublish[side])
      .filter(([, ms]) => ms >= 0.05)
      .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
      .join(', ');
  return [
    `bench: ipns publish   api ${showSpread(r.apiPublishes, 1)}/s vs ipfs name publish --allow-offline ${showSpread(r.kuboPublishes, 1)}/s ` +
      `ratio ${showSpread(r.ratio)} (min/median/max of ${PUBLISH_ROUNDS} rounds of ${LANES * PUBLISHES_PER_LANE}, ${LANES} names at a time; goal >= 0.3: ` +
      `${r.ratio.median >= 0.3 ? 'met' : 'missed'})`,
    `bench: ipns publish   CPU ms per publish: through the API ${perPublish('api')}; Kubo alone ${perPublish('kubo')}; ` +
      `MongoDB operations per publish from the API: ${r.commands.reduce((s, [, n]) => s + n, 0).toFixed(2)}: ` +
      r.commands.map(([k, n]) => `${k} ${n.toFixed(2)}`).join(', '),
    `bench: ipns names     ${r.names.toLocaleString('en')} names (made ${r.createPerSecond.toFixed(1)}/s, first publish ${r.firstPublishPerSecond.toFixed(1)}/s): ` +
      `all republished at ${r.republishPerSecond.toFixed(1)}/s; CPU ms per republish: ${cpu}; ` +
      `one worker core keeps ~${Math.floor(DEFAULT_INTERVAL_S / workerS).toLocaleString('en')} names at the 4 h interval, ` +
      `this machine (everything on it) ~${Math.floor(r.republishPerSecond * DEFAULT_INTERVAL_S).toLocaleString('en')}; ` +
      `history per name per day ${perDay * r.eventsPerRound} events, ${((perDay * r.bytesPerRound) / 1024).toFixed(1)} KiB ` +
      `(${r.eventsPerRound} events, ${r.bytesPerRound} bytes a round; a run continues as new after 50 rounds)`,
  ];
}
