import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../infra/config.js';
import { ConfigError } from '../infra/errors.js';
import { tempDir, testEnv } from './support/stack.js';

function problems(env: Record<string, string | undefined>, needs?: Parameters<typeof loadConfig>[1]): string[] {
  try {
    loadConfig(env, needs);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

test('a complete environment loads, with defaults filled in', () => {
  const config = loadConfig(testEnv({ API_PORT: undefined, API_HOST: undefined }));
  expect(config.api).toEqual({ host: '127.0.0.1', port: 3000, publicUrl: null, jsonBodyLimit: '1mb' });
  expect(config.masterKey).toHaveLength(32);
  expect(config.plans.byName.get('dharma')!.requestsPerMinute).toBe(180);
  expect([...config.plans.byName.keys()].sort()).toEqual(['bodhi', 'dharma', 'karma', 'nirvana', 'trial']);
  expect(config.temporal).toEqual({ address: expect.any(String), namespace: 'default', taskQueue: 'stupa' });
});

test("several peers: the other peers' gateways as a list, and whether the own Cluster peer is allocated first", () => {
  const single = loadConfig(testEnv());
  expect(single.kubo.peerGatewayUrls).toEqual([]);
  expect(single.cluster).toMatchObject({ replicationMin: -1, replicationMax: -1, allocateLocal: true });
  const several = loadConfig(
    testEnv({ KUBO_PEER_GATEWAY_URLS: ' http://ipfs-1.ipfs:8080/, http://ipfs-2.ipfs:8080 ,', CLUSTER_ALLOCATE_LOCAL: 'false' }),
  );
  expect(several.kubo.peerGatewayUrls).toEqual(['http://ipfs-1.ipfs:8080', 'http://ipfs-2.ipfs:8080']);
  expect(several.cluster.allocateLocal).toBe(false);
  const found = problems(testEnv({ KUBO_PEER_GATEWAY_URLS: 'http://ok:8080,ipfs-2:8080', CLUSTER_ALLOCATE_LOCAL: 'yes' }));
  expect(found).toHaveLength(2);
  expect(found.join('\n')).toMatch(/KUBO_PEER_GATEWAY_URLS/);
  expect(found.join('\n')).toMatch(/CLUSTER_ALLOCATE_LOCAL/);
});

test('every bad value is reported at once, by name', () => {
  const found = problems(
    testEnv({ API_PORT: 'eighty', KUBO_API_URL: 'ftp://x', MONGODB_URI: 'postgres://x', LOG_LEVEL: 'loud', TEMPORAL_ADDRESS: 'nohost' }),
  );
  expect(found).toHaveLength(5);
  for (const name of ['API_PORT', 'KUBO_API_URL', 'MONGODB_URI', 'LOG_LEVEL', 'TEMPORAL_ADDRESS']) {
    expect(found.some((p) => p.startsWith(`${name}:`))).toBe(true);
  }
});

test('missing endpoints and master key are named, with the way out', () => {
  const found = problems({ DATA_DIR: tempDir() });
  expect(found).toEqual(
    expect.arrayContaining([
      expect.stringMatching(/^MONGODB_URI is not set and no local stack runs/),
      expect.stringMatching(/^TEMPORAL_ADDRESS is not set/),
      expect.stringMatching(/^KUBO_API_URL is not set/),
      expect.stringMatching(/^CLUSTER_API_URL is not set/),
      expect.stringMatching(/^MASTER_KEY is not set and .*master\.key does not exist/),
    ]),
  );
  // A process that needs only MongoDB is not asked for the others.
  expect(problems({ DATA_DIR: tempDir() }, ['mongodb']).every((p) => /MONGODB_URI|MASTER_KEY/.test(p))).toBe(true);
});

test('endpoints and master key come from a running local stack in DATA_DIR', () => {
  const dir = tempDir();
  fs.writeFileSync(
    path.join(dir, 'stack.json'),
    JSON.stringify({
      endpoints: {
        mongodbUri: 'mongodb://127.0.0.1:1/x',
        temporalAddress: '127.0.0.1:2',
        kuboApiUrl: 'http://127.0.0.1:3',
        clusterApiUrl: 'http://127.0.0.1:4',
      },
    }),
  );
  fs.writeFileSync(path.join(dir, 'master.key'), 'ab'.repeat(32));
  const config = loadConfig({ DATA_DIR: dir });
  expect(config.mongodbUri).toBe('mongodb://127.0.0.1:1/x');
  expect(config.kubo.apiUrl).toBe('http://127.0.0.1:3');
  expect(config.masterKey).toEqual(Buffer.alloc(32, 0xab));
  // The environment wins over the stack file.
  expect(loadConfig({ DATA_DIR: dir, KUBO_API_URL: 'http://10.0.0.9:5001/' }).kubo.apiUrl).toBe('http://10.0.0.9:5001');
});

test('a master key of the wrong length is refused', () => {
  expect(problems(testEnv({ MASTER_KEY: 'abcd' }))).toEqual(['MASTER_KEY must be 32 bytes, as 64 hex characters or base64']);
});

test('a bad plans file is refused with the field named', () => {
  const file = path.join(tempDir(), 'plans.json');
  fs.writeFileSync(file, JSON.stringify({ defaultPlan: 'gold', plans: { dharma: { label: 'x', storageMB: -1 } } }));
  const found = problems(testEnv({ PLANS_FILE: file }));
  expect(found.some((p) => p.includes('plans.dharma.storageMB'))).toBe(true);
  expect(found.some((p) => p.includes('plans.dharma.requestsPerMinute'))).toBe(true);

  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync('infra/plans/variant-a.json', 'utf8')), defaultPlan: 'gold' }));
  expect(problems(testEnv({ PLANS_FILE: file }))).toEqual([expect.stringContaining('defaultPlan must name one of the plans')]);

  fs.writeFileSync(file, '{not json');
  expect(problems(testEnv({ PLANS_FILE: file }))[0]).toMatch(/cannot be read as JSON/);
});

test('both shipped IPNS variants load', () => {
  const a = loadConfig(testEnv({ PLANS_FILE: 'infra/plans/variant-a.json' })).plans;
  const b = loadConfig(testEnv({ PLANS_FILE: 'infra/plans/variant-b.json' })).plans;
  expect(a.get('dharma').ipnsNames).toBe(0);
  expect(b.get('dharma')).toMatchObject({ ipnsNames: 1, ipnsPublishesPerMonth: 10 });
  expect(b.get('trial')).toMatchObject({ ipnsNames: 1, trialDays: 7 });
  expect(a.get('karma')).toMatchObject({ ipnsNames: 10, ipnsPublishesPerMonth: 1000 });
});
