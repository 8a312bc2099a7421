// Temporal's connection settings (TLS, mTLS, an API key) and its setup settings, as loadConfig
// validates them and as connectionOptions hands them to both SDKs' connections.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../infra/config.js';
import { ConfigError } from '../../infra/errors.js';
import { connectionOptions } from '../../infra/temporal/setup.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-tls-'));
const pem = (name: string, label: string) => {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `-----BEGIN ${label}-----\nTUlJ${name}\n-----END ${label}-----\n`);
  return file;
};
const ca = pem('ca.pem', 'CERTIFICATE');
const cert = pem('client.pem', 'CERTIFICATE');
const key = pem('client.key', 'PRIVATE KEY');

/** Only Temporal is needed: no stack, no master key. */
const load = (env: Record<string, string>) =>
  loadConfig({ DATA_DIR: dir, TEMPORAL_ADDRESS: 'temporal.example:7233', ...env }, ['temporal']);

function problems(env: Record<string, string>): string[] {
  try {
    load(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

test('without any TLS variable: plain text, the default namespace, setup auto with 7 days', () => {
  const config = load({});
  expect(config.temporal).toEqual({ address: 'temporal.example:7233', namespace: 'default', taskQueue: 'stupa' });
  expect(config.temporalSetup).toEqual({ mode: 'auto', retentionDays: 7 });
  expect(connectionOptions(config.temporal)).toEqual({ address: 'temporal.example:7233' });
});

test('mTLS: the files are read at load and given to the SDK as its TLS options', () => {
  const config = load({
    TEMPORAL_TLS_CA_FILE: ca,
    TEMPORAL_TLS_CERT_FILE: cert,
    TEMPORAL_TLS_KEY_FILE: key,
    TEMPORAL_TLS_SERVER_NAME: 'frontend.internal',
  });
  expect(connectionOptions(config.temporal)).toEqual({
    address: 'temporal.example:7233',
    tls: {
      serverNameOverride: 'frontend.internal',
      serverRootCACertificate: fs.readFileSync(ca),
      clientCertPair: { crt: fs.readFileSync(cert), key: fs.readFileSync(key) },
    },
  });
  // TEMPORAL_TLS=true alone: TLS with the system's CAs.
  expect(connectionOptions(load({ TEMPORAL_TLS: 'true' }).temporal)).toEqual({ address: 'temporal.example:7233', tls: {} });
});

test('a client certificate without its key, or a key without its certificate, is refused', () => {
  expect(problems({ TEMPORAL_TLS_CERT_FILE: cert })).toEqual([
    expect.stringMatching(/^TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE .*set both or neither/),
  ]);
  expect(problems({ TEMPORAL_TLS_KEY_FILE: key })).toHaveLength(1);
});

test('a missing file, or one that is not PEM, is refused by name', () => {
  const missing = path.join(dir, 'nope.pem');
  expect(problems({ TEMPORAL_TLS_CA_FILE: missing })).toEqual([`TEMPORAL_TLS_CA_FILE: ${missing} does not exist`]);
  const der = path.join(dir, 'ca.der');
  fs.writeFileSync(der, Buffer.from([0x30, 0x82, 0x01, 0x0a]));
  expect(problems({ TEMPORAL_TLS_CA_FILE: der })).toEqual([expect.stringMatching(/^TEMPORAL_TLS_CA_FILE: .*ca\.der is not a PEM file/)]);
  // A certificate file that is missing is named, though its key is there.
  expect(problems({ TEMPORAL_TLS_CERT_FILE: missing, TEMPORAL_TLS_KEY_FILE: key })).toEqual([
    `TEMPORAL_TLS_CERT_FILE: ${missing} does not exist`,
  ]);
});

test('an API key implies TLS, unless TEMPORAL_TLS=false says otherwise', () => {
  const cloud = load({ TEMPORAL_API_KEY: 'eyJ.key' });
  expect(cloud.temporal.apiKey).toBe('eyJ.key');
  expect(connectionOptions(cloud.temporal)).toEqual({ address: 'temporal.example:7233', tls: {}, apiKey: 'eyJ.key' });
  // Behind a local proxy that adds TLS; the SDKs would turn TLS on by themselves without `false`.
  expect(connectionOptions(load({ TEMPORAL_API_KEY: 'eyJ.key', TEMPORAL_TLS: 'false' }).temporal)).toEqual({
    address: 'temporal.example:7233',
    tls: false,
    apiKey: 'eyJ.key',
  });
  expect(problems({ TEMPORAL_API_KEY: 'two words' })).toEqual([expect.stringMatching(/^TEMPORAL_API_KEY: /)]);
  expect(problems({ TEMPORAL_TLS: 'false', TEMPORAL_TLS_CA_FILE: ca })).toEqual(['TEMPORAL_TLS is false, but TEMPORAL_TLS_CA_FILE is set']);
  expect(problems({ TEMPORAL_TLS: 'yes' })).toEqual([expect.stringMatching(/^TEMPORAL_TLS: /)]);
});

test('setup mode and retention are validated; the namespace comes from the variable, else the local stack', () => {
  expect(load({ TEMPORAL_SETUP: 'off', TEMPORAL_RETENTION_DAYS: '30' }).temporalSetup).toEqual({ mode: 'off', retentionDays: 30 });
  expect(
    problems({ TEMPORAL_SETUP: 'manual', TEMPORAL_RETENTION_DAYS: '0' })
      .map((p) => p.split(':')[0])
      .sort(),
  ).toEqual(['TEMPORAL_RETENTION_DAYS', 'TEMPORAL_SETUP']);
  expect(problems({ TEMPORAL_RETENTION_DAYS: '3651' })).toHaveLength(1);
  expect(problems({ TEMPORAL_RETENTION_DAYS: '1.5' })).toHaveLength(1);

  const stackDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-ns-'));
  fs.writeFileSync(
    path.join(stackDir, 'stack.json'),
    JSON.stringify({ endpoints: { temporalAddress: '127.0.0.1:7233', temporalNamespace: 'stupa-local' } }),
  );
  expect(loadConfig({ DATA_DIR: stackDir }, ['temporal']).temporal.namespace).toBe('stupa-local');
  expect(loadConfig({ DATA_DIR: stackDir, TEMPORAL_NAMESPACE: 'prod' }, ['temporal']).temporal.namespace).toBe('prod');
});

test('worker versions: on by default with this checkout as the build; named, manual or off as asked', () => {
  const { version } = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string };
  // What git itself says (a fresh clone keeps its refs packed: infra/build-id.ts reads packed-refs too).
  const git = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' });
  const commit = git.status === 0 ? git.stdout.trim() : undefined;
  expect(load({}).workerVersion).toEqual({ deploymentName: 'stupa', buildId: commit ? `${version}+${commit}` : version, promote: 'auto' });
  if (commit) expect(commit).toMatch(/^[0-9a-f]{12}$/);
  expect(load({ WORKER_BUILD_ID: '1.2.3+abc', WORKER_DEPLOYMENT_NAME: 'blue', WORKER_PROMOTE: 'manual' }).workerVersion).toEqual({
    deploymentName: 'blue',
    buildId: '1.2.3+abc',
    promote: 'manual',
  });
  expect(load({ WORKER_VERSIONING: 'off' }).workerVersion).toBeNull();
  expect(problems({ WORKER_BUILD_ID: 'has space' })[0]).toMatch(/^WORKER_BUILD_ID: /);
  expect(problems({ WORKER_DEPLOYMENT_NAME: 'a.b' })[0]).toMatch(/^WORKER_DEPLOYMENT_NAME: /);
  expect(problems({ WORKER_PROMOTE: 'sometimes' })[0]).toMatch(/^WORKER_PROMOTE: /);
});
