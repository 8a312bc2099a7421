// The hot paths' figures as `npm run bench` prints them: the 1 GiB upload against Kubo's own
// add, many small files against Kubo's add of as many, and the status reads against bare
// Express, each a ratio with its spread over rounds (min/median/max) and its goal.
import { MiB } from './content.js';
import { CONNECTIONS, STATUS_SECONDS, type StatusFigures, type StatusResult } from './latency.js';
import { CLIENTS, FILES, type SmallResult } from './small.js';
import { showSpread } from './spread.js';
import type { UploadResult } from './upload.js';

const verdict = (met: boolean) => (met ? 'met' : 'MISSED');
const mb = (bytes: number) => Math.round(bytes / MiB);
const n = (x: number) => Math.round(x).toLocaleString('en');

export const UPLOAD_RATIO_GOAL = 0.9;
export const UPLOAD_CPU_GOAL = 0.3;
/** Issue #29: the API's CPU a GiB over the bare Node pipe's, and the ratio to Kubo's add on cores of their own. */
export const UPLOAD_CPU_OVER_PIPE_GOAL = 1.1;
export const UPLOAD_SEPARATE_RATIO_GOAL = 0.9;
export const SMALL_RATIO_GOAL = 0.35;
/** Issue #27: the service's own CPU (API, FerretDB and worker) per small upload, in ms. */
export const SMALL_CPU_GOAL_MS = 4;
export const STATUS_RATIO_GOAL = 0.6;
export const STATUS_P99_GOAL = 2;

export function uploadLine(u: UploadResult): string {
  const growth = u.rssPeak - u.rssBefore;
  const met = u.rounds.filter((r) => r.ratio >= UPLOAD_RATIO_GOAL).length;
  const cpu = u.cpu
    ? `  cpu s/GiB: api ${u.cpu.api.toFixed(2)} (goal <= ${UPLOAD_CPU_GOAL}: ${verdict(u.cpu.api <= UPLOAD_CPU_GOAL)}), ` +
      `bare proxy ${u.cpu.proxy.toFixed(2)} (api/bare ${(u.cpu.api / u.cpu.proxy).toFixed(2)}, goal <= ${UPLOAD_CPU_OVER_PIPE_GOAL}: ` +
      `${verdict(u.cpu.api / u.cpu.proxy <= UPLOAD_CPU_OVER_PIPE_GOAL)}), kubo ${u.cpu.kuboViaApi.toFixed(2)} via api / ${u.cpu.kubo.toFixed(2)} direct, ` +
      `client ${u.cpu.clientViaApi.toFixed(2)} / ${u.cpu.client.toFixed(2)}`
    : '';
  return (
    `bench: upload 1 GiB   ratio ${showSpread(u.ratio)} (min/median/max of ${u.rounds.length} rounds, alternating, client ${u.client}; ` +
    `goal >= ${UPLOAD_RATIO_GOAL}: ${met} of ${u.rounds.length} rounds, ${verdict(u.ratio.min >= UPLOAD_RATIO_GOAL)})  ` +
    `api ${showSpread(u.apiMBps, 1)} MB/s  kubo ${showSpread(u.kuboMBps, 1)} MB/s  ` +
    `bare node proxy ratio ${showSpread(u.proxyRatio)} (the floor of any proxy in Node)${cpu}  ` +
    `api rss ${mb(u.rssBefore)} -> ${mb(u.rssPeak)} MB (peak${u.peakIsOfUpload ? ' of the uploads' : ' since start'}; ` +
    `growth ${mb(growth)} MB, goal <= ~100: ${verdict(growth <= 110 * MiB)})  cid ${u.sameCid ? 'same as kubo' : 'DIFFERS from kubo'}\n` +
    (u.separate
      ? `bench: upload 1 GiB   API and Kubo on cores of their own (taskset): ratio ${showSpread(u.separate.ratio)} (${u.separate.rounds.length} rounds; ` +
        `goal >= ${UPLOAD_SEPARATE_RATIO_GOAL}: ${verdict(u.separate.ratio.median >= UPLOAD_SEPARATE_RATIO_GOAL)})`
      : 'bench: upload 1 GiB   API and Kubo on cores of their own: not measured (no taskset or one CPU)')
  );
}

export function smallLine(s: SmallResult): string {
  const ours = (s.cpuMs.api ?? 0) + (s.cpuMs.ferretdb ?? 0) + (s.cpuMs.worker ?? 0);
  const cpu = Object.entries(s.cpuMs)
    .map(([k, ms]) => `${k} ${ms.toFixed(1)}`)
    .join(', ');
  return (
    `bench: small files    ${FILES.toLocaleString('en')} JSON files of 1 KiB, one empty account, ${CLIENTS} clients: ` +
    `api ${showSpread(s.apiPerSecond, 1)}/s  kubo add ${showSpread(s.kuboPerSecond, 1)}/s  ratio ${showSpread(s.ratio)} ` +
    `(min/median/max of ${s.rounds.length} rounds; goal >= ${SMALL_RATIO_GOAL}: ${verdict(s.ratio.min >= SMALL_RATIO_GOAL)})  ` +
    `503s ${s.busy} (goal 0: ${verdict(s.busy === 0)})  all pinned in Cluster ${showSpread(s.pinnedAfter, 1)} s after the first request  ` +
    `[cpu ms/upload: ${cpu}; ours (api + ferretdb + worker) ${ours.toFixed(1)} (goal <= ${SMALL_CPU_GOAL_MS}: ${verdict(ours <= SMALL_CPU_GOAL_MS)})]  [MongoDB operations/upload from the API: ${s.commands.reduce((sum, [, n]) => sum + n, 0).toFixed(2)}: ` +
    `${s.commands.map(([k, n]) => `${k} ${n.toFixed(2)}`).join(', ')}]`
  );
}

function statusFigure(name: string, f: StatusFigures, cpuMs: number): string {
  return (
    `${name} ${showSpread(f.perSecond, 0)} req/s ratio ${showSpread(f.ratio)} (goal >= ${STATUS_RATIO_GOAL}: ` +
    `${verdict(f.ratio.min >= STATUS_RATIO_GOAL)}) p99 ${showSpread(f.p99, 0)} ms = ${showSpread(f.p99Ratio, 1)}x bare ` +
    `(goal < ${STATUS_P99_GOAL}x: ${verdict(f.p99Ratio.max < STATUS_P99_GOAL)}) api cpu ${cpuMs.toFixed(2)} ms/req` +
    `${f.bad > 0 ? ` [${f.bad} not 2xx: ${f.statuses}]` : ''}`
  );
}

export function statusLine(s: StatusResult): string {
  return (
    `bench: status reads   ${CONNECTIONS} connections, ${s.rounds} rounds of ${STATUS_SECONDS} s (min/median/max): ` +
    `${statusFigure('GET /pin/:cid', s.pin, s.apiCpuMs.pin)};  ${statusFigure('GET /file/:cid', s.file, s.apiCpuMs.file)};  ` +
    `bare express ${showSpread(s.bare.perSecond, 0)} req/s p99 ${showSpread(s.bare.p99, 0)} ms (${n(s.bare.bad)} not 2xx)`
  );
}

/** Wrong, not slow. */
export function hotPathsBroken(u?: UploadResult, s?: StatusResult): string[] {
  return [
    ...(u && !u.sameCid ? ['the API and Kubo gave different CIDs for the same bytes'] : []),
    ...(s && s.bare.bad > 0 ? [`${s.bare.bad} bare Express answers were errors, timeouts or not 2xx: the load test itself is off`] : []),
    ...(s && s.pin.bad + s.file.bad > 0 ? [`${s.pin.bad + s.file.bad} status reads were not 2xx`] : []),
  ];
}
