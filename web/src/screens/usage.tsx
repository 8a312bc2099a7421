// Usage: the plan's limits as bars, and charts of the last 30 days (storage, gateway bandwidth
// and uploads per day, uploads by type) drawn with uPlot, each with its numbers in a table too
// (a canvas says nothing to a screen reader).
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api } from '../api';
import type { ScreenProps } from '../route';
import { ErrorNote, formatBytes, Section, useAction } from '../ui';

interface Analytics {
  totals: { uploads: number; storageMB: number; fileTypes: Record<string, number> };
  daily: { date: string; uploads: number; sizeMB: number; gatewayMB: number }[];
  storageGrowth: { date: string; cumulativeMB: number }[];
  gatewayBandwidthMB: number;
  gatewayBandwidthLimitMB: number;
  ipnsPublishesThisMonth: number;
}

const WIDTH = 640;
const HEIGHT = 220;
const DAY_S = 86400;
const seconds = (day: string) => Date.parse(`${day}T00:00:00Z`) / 1000;

/** MB values drawn in the unit that suits their largest (the table keeps the API's MB). */
function byteScale(valuesMB: number[]): { unit: string; factor: number } {
  const max = Math.max(0, ...valuesMB);
  if (max >= 1024) return { unit: 'GiB', factor: 1 / 1024 };
  if (max >= 1) return { unit: 'MiB', factor: 1 };
  return { unit: 'KiB', factor: 1024 };
}

interface ChartProps {
  title: string;
  unit: string;
  /** The values are MB: drawn in KiB, MiB or GiB, whichever suits them. */
  bytes?: boolean;
  labels: string[];
  values: number[];
  /** Days on a time axis, or categories (types) on an index axis. */
  kind: 'days' | 'categories';
  bars?: boolean;
}

function Chart({ title, unit, bytes, labels, values, kind, bars }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current) return;
    const xs = kind === 'days' ? labels.map(seconds) : labels.map((_, i) => i);
    const scale = bytes ? byteScale(values) : { unit, factor: 1 };
    // Half a slot of room at each end, so the first and last bars are whole.
    const half = kind === 'days' ? DAY_S / 2 : 0.5;
    const plot = new uPlot(
      {
        width: Math.min(WIDTH, box.current.clientWidth || WIDTH),
        height: HEIGHT,
        scales: {
          x: { time: kind === 'days', range: () => [(xs[0] ?? 0) - half, (xs.at(-1) ?? 0) + half] },
          // Counts and sizes start at zero, so bars compare by their heights.
          y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        legend: { show: false },
        axes: [
          kind === 'days' ? {} : { values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? (labels[t] ?? '') : '')) },
          { label: scale.unit, size: 60 },
        ],
        series: [
          {},
          {
            label: title,
            stroke: '#2563eb',
            fill: bars ? '#93c5fd' : 'rgba(37, 99, 235, 0.15)',
            paths: bars ? uPlot.paths.bars!({ size: [0.6, 40] }) : undefined,
            points: { show: false },
          },
        ],
      },
      [xs, values.map((v) => v * scale.factor)],
      box.current,
    );
    return () => plot.destroy();
  }, [labels.join(), values.join()]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: chart; the numbers follow in a table`} />
      <details>
        <summary>{title}: the numbers</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">{kind === 'days' ? 'Day' : 'Type'}</th>
              <th scope="col">{unit}</th>
            </tr>
          </thead>
          <tbody>
            {labels.map((l, i) => (
              <tr key={l}>
                <td>{l}</td>
                <td>{values[i]}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

function Limit({ label, used, limit, unit }: { label: string; used: number; limit: number; unit: 'MB' | 'publishes' }) {
  const say = (n: number) => (unit === 'MB' ? formatBytes(n * 2 ** 20) : String(n));
  return (
    <div class="limit">
      <span>{label}</span>
      <meter min={0} max={limit || 1} value={used} high={(limit || 1) * 0.8} aria-label={label} />
      <span>
        {say(used)} of {say(limit)}
        {unit === 'MB' ? '' : ` ${unit}`}
      </span>
    </div>
  );
}

export function UsageScreen({ profile }: ScreenProps) {
  const [data, setData] = useState<Analytics | null>(null);
  const [run, error] = useAction();
  useEffect(() => void run(async () => setData(await api<Analytics>('GET', '/analytics'))), []);
  const types = Object.entries(data?.totals.fileTypes ?? {}).sort((a, b) => b[1] - a[1]);
  return (
    <>
      <ErrorNote error={error} />
      {profile && data && (
        <Section title={`Plan limits (${profile.plan})`}>
          <Limit label="Storage" used={profile.storageUsedMB} limit={profile.limits.storageMB} unit="MB" />
          <Limit
            label="Gateway bandwidth this month"
            used={profile.gatewayBandwidthUsedMB}
            limit={profile.limits.gatewayBandwidthMB}
            unit="MB"
          />
          <Limit
            label="IPNS publishes this month"
            used={data.ipnsPublishesThisMonth}
            limit={profile.limits.ipnsPublishesPerMonth}
            unit="publishes"
          />
        </Section>
      )}
      {data && (
        <Section title="The last 30 days">
          <p>
            {data.totals.uploads} uploads; {formatBytes(data.totals.storageMB * 2 ** 20)} stored now;{' '}
            {formatBytes(data.gatewayBandwidthMB * 2 ** 20)} sent by the gateway.
          </p>
          <div class="charts">
            <Chart
              title="Storage over time"
              unit="MB"
              bytes
              kind="days"
              labels={data.storageGrowth.map((d) => d.date)}
              values={data.storageGrowth.map((d) => d.cumulativeMB)}
            />
            <Chart
              title="Gateway bandwidth per day"
              unit="MB"
              bytes
              kind="days"
              bars
              labels={data.daily.map((d) => d.date)}
              values={data.daily.map((d) => d.gatewayMB)}
            />
            <Chart
              title="Uploads per day"
              unit="uploads"
              kind="days"
              bars
              labels={data.daily.map((d) => d.date)}
              values={data.daily.map((d) => d.uploads)}
            />
            <Chart
              title="Uploads by type"
              unit="uploads"
              kind="categories"
              bars
              labels={types.map((t) => t[0])}
              values={types.map((t) => t[1])}
            />
          </div>
        </Section>
      )}
    </>
  );
}
