import { freePort } from '../infra/stack/ports.js';
import type { ApiServer } from '../api/rest/server.js';
import { call, errorReason, startTestApi } from './support/stack.js';

let api: ApiServer;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(() => api.close());

test('/healthz answers without a key', async () => {
  const res = await call(api, 'GET', '/healthz');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ status: 'ok' });
});

test('/readyz checks every dependency for real', async () => {
  const res = await call(api, 'GET', '/readyz');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ status: 'ready', checks: { mongodb: 'ok', temporal: 'ok', kubo: 'ok', cluster: 'ok' } });
});

test.each([
  ['kubo', 'KUBO_API_URL', (port: number) => `http://127.0.0.1:${port}`],
  ['cluster', 'CLUSTER_API_URL', (port: number) => `http://127.0.0.1:${port}`],
  ['temporal', 'TEMPORAL_ADDRESS', (port: number) => `127.0.0.1:${port}`],
])('/readyz is 503 naming %s when it is stopped', async (name, variable, address) => {
  // A port nothing listens on: what a stopped dependency looks like from here.
  const dead = await startTestApi({ [variable]: address(await freePort()) });
  try {
    const res = await call(dead, 'GET', '/readyz');
    expect(res.status).toBe(503);
    expect(errorReason(res)).toBe('DEPENDENCY_UNAVAILABLE');
    expect(res.body.error.details).toBe(`not reachable: ${name}`);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body.checks[name]).toMatch(/^unreachable: /);
    for (const other of ['mongodb', 'temporal', 'kubo', 'cluster'].filter((n) => n !== name)) expect(res.body.checks[other]).toBe('ok');
  } finally {
    await dead.close();
  }
});

test('/metrics exposes request metrics in the Prometheus format', async () => {
  const before = await call(api, 'GET', '/metrics');
  const count = (text: string) =>
    Number(/stupa_http_request_duration_seconds_count\{method="GET",route="\/openapi.json",status="200"\} (\d+)/.exec(text)?.[1] ?? 0);
  await call(api, 'GET', '/openapi.json');
  await call(api, 'GET', '/openapi.json');
  const res = await call(api, 'GET', '/metrics');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  expect(count(res.text)).toBe(count(before.text) + 2);
  expect(res.text).toMatch(/stupa_process_resident_memory_bytes \d+/);
});

test('/openapi.json is served', async () => {
  const res = await call(api, 'GET', '/openapi.json');
  expect(res.status).toBe(200);
  expect(res.body.openapi).toBe('3.1.0');
});
