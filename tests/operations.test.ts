import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freePort } from '../stack/ports.js';
import type { ApiServer } from '../api/server.js';
import { call, errorReason, stack, startTestApi, tempDir } from './support/stack.js';

const exec = promisify(execFile);

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
  expect(res.body).toEqual({ status: 'ready', checks: { mongodb: 'ok', temporal: 'ok', kubo: 'ok', kuboGateway: 'ok', cluster: 'ok' } });
});

test.each([
  ['kubo', 'KUBO_API_URL', (port: number) => `http://127.0.0.1:${port}`],
  ['kuboGateway', 'KUBO_GATEWAY_URL', (port: number) => `http://127.0.0.1:${port}`],
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
    for (const other of ['mongodb', 'temporal', 'kubo', 'kuboGateway', 'cluster'].filter((n) => n !== name))
      expect(res.body.checks[other]).toBe('ok');
  } finally {
    await dead.close();
  }
});

test('/readyz fails by name when KUBO_GATEWAY_URL is a server but not a gateway', async () => {
  // Kubo's RPC API: it answers HTTP, but not as a gateway (what :8080 beside an external Kubo
  // whose gateway listens elsewhere may be).
  const wrong = await startTestApi({ KUBO_GATEWAY_URL: stack.kuboApiUrl });
  try {
    const res = await call(wrong, 'GET', '/readyz');
    expect(res.status).toBe(503);
    expect(res.body.error.details).toBe('not reachable: kuboGateway');
    expect(res.body.checks.kuboGateway).toMatch(
      /^unreachable: http:\/\/127\.0\.0\.1:\d+ does not answer as an IPFS gateway \(HEAD \/ipfs\/bafkqaaa: \d+\)$/,
    );
    expect(res.body.checks.kubo).toBe('ok');
  } finally {
    await wrong.close();
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

test('npm start stops by name when KUBO_GATEWAY_URL is not a gateway', async () => {
  // What `npm start` runs once its binaries are there, with the test stack as its four external
  // servers (so it starts none) and Kubo's RPC API given as its gateway.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATA_DIR: tempDir(),
    MONGODB_URI: stack.mongodbUri,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    KUBO_API_URL: stack.kuboApiUrl,
    CLUSTER_API_URL: stack.clusterApiUrl,
    KUBO_GATEWAY_URL: stack.kuboApiUrl,
    API_PORT: String(await freePort()),
  };
  const run = await exec(process.execPath, ['--import', 'tsx', 'stack/start.ts'], { env, timeout: 60_000 }).then(
    (ok) => ({ code: 0, out: ok.stdout + ok.stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, out: err.stdout + err.stderr }),
  );
  expect(run.code).toBe(1);
  expect(run.out).toContain(
    `failed to start: Kubo's gateway: ${stack.kuboApiUrl} does not answer as an IPFS gateway (HEAD /ipfs/bafkqaaa: `,
  );
  expect(run.out).toContain(`set KUBO_GATEWAY_URL to the gateway of the Kubo at ${stack.kuboApiUrl}`);
  expect(run.out).not.toContain('Stupa is running');
}, 90_000);
