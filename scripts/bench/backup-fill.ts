// How `npm run bench -- --backup` fills its stack (backup.ts says what and why): N contents in
// Kubo, N file records of USERS users, and Cluster's pin set, through REST and then, past a time
// budget, `state import`.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { sha256 } from 'multiformats/hashes/sha2';
import pLimit from 'p-limit';
import { pinMetadata } from '../../core/hold-sync.js';
import type { FileRecord } from '../../infra/db/files.js';
import type { openDatabase } from '../../infra/db/index.js';
import { expandMigrations } from '../../infra/db/migrations/runner.js';
import { parseCid } from '../../infra/ipfs/cid.js';
import { createClusterClient } from '../../infra/ipfs/cluster.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { randomBase62 } from '../../infra/secrets.js';
import { binaryPath } from '../../stack/binaries.js';
import { childEnv } from '../../stack/process.js';
import type { Stack } from '../../stack/stack.js';

const run = promisify(execFile);

export const USERS = 4;
const ADD_BATCH = 2000;
const INSERT_BATCH = 1000;
const REST_PINS = 1000;
const REST_CONCURRENCY = 8;
const REST_BUDGET_S = 60;

export type Db = Awaited<ReturnType<typeof openDatabase>>;
/** As the service pins with its defaults (CLUSTER_REPLICATION_MIN/MAX -1: every peer). */
export const asService = (metadata: Record<string, string>) => ({ replicationMin: -1, replicationMax: -1, metadata });
export type Say = (line: string) => void;

/** File i's content: 1-4 KiB of AES-CTR keyed by the run's seed, made again for the check. */
export function contentOf(seed: Buffer, i: number): Buffer {
  const iv = Buffer.alloc(16);
  iv.writeUInt32BE(i, 12);
  return crypto.createCipheriv('aes-128-ctr', seed, iv).update(Buffer.alloc(1024 + ((i * 2654435761) % 3073)));
}

export const allocationLines = async (clusterApiUrl: string) =>
  (await (await fetch(`${clusterApiUrl}/allocations?filter=pin`)).text()).split('\n').filter((l) => l.trim() !== '');

export function fileRecord(userId: string, id: string, cid: string, size: number, at: number, i: number): FileRecord {
  const common = { userId, cid, multihash: parseCid(cid).multihash, name: `file-${i}.bin`, description: null };
  return {
    _id: id,
    ...common,
    size,
    dagSize: size,
    mimeType: 'application/octet-stream',
    folderId: null,
    metadata: {},
    createdAt: at,
    updatedAt: at,
  };
}

export interface Filled {
  cids: string[];
  fileIds: string[];
  users: string[];
  at0: number;
  contentBytes: number;
}

export async function fillKubo(stack: Stack, n: number, seed: Buffer, say: Say): Promise<Pick<Filled, 'cids' | 'contentBytes'>> {
  const kubo = createKubo(stack.endpoints.kuboApiUrl);
  const cids = new Array<string>(n);
  let contentBytes = 0;
  for (let from = 0; from < n; from += ADD_BATCH) {
    const entries = Array.from({ length: Math.min(ADD_BATCH, n - from) }, (_, k) => ({
      path: `f${from + k}`,
      content: contentOf(seed, from + k),
    }));
    for await (const added of kubo.addAll(entries, { cidVersion: 1, rawLeaves: true, pin: true }))
      cids[Number(added.path.slice(1))] = added.cid.toString();
    for (const { path: p, content } of entries) {
      contentBytes += content.length;
      const expected = CID.createV1(raw.code, await sha256.digest(content)).toString();
      if (cids[Number(p.slice(1))] !== expected) throw new Error(`Kubo gave ${p} the CID ${cids[Number(p.slice(1))]}, not ${expected}`);
    }
    if ((from + ADD_BATCH) % 20_000 === 0) say(`kubo: ${from + ADD_BATCH} added`);
  }
  return { cids, contentBytes };
}

export async function fillRecords(db: Db, filled: Omit<Filled, 'fileIds' | 'users' | 'at0'>, seed: Buffer) {
  await expandMigrations(db); // as the API's start: the `twins` index
  const users: string[] = [];
  const tag = seed.toString('hex', 0, 4);
  for (let u = 0; u < USERS; u++)
    users.push((await db.users.create({ email: `backup-${u}-${tag}@example.test`, name: `Backup ${u}`, plan: 'nirvana' }))!._id);
  const n = filled.cids.length;
  const fileIds = Array.from({ length: n }, () => `fil_${randomBase62(16)}`);
  const at0 = Date.now() - n;
  for (let from = 0; from < n; from += INSERT_BATCH) {
    const batch = Array.from({ length: Math.min(INSERT_BATCH, n - from) }, (_, k) => from + k);
    await db.files.model.insertMany(
      batch.map((i) => fileRecord(users[i % USERS]!, fileIds[i]!, filled.cids[i]!, contentOf(seed, i).length, at0 + i, i)),
      { ordered: false },
    );
  }
  return { fileIds, users, at0 };
}

/** Cluster's pin set; an import restarts the stack (`restart`): the stack it ends on is returned. */
export async function fillCluster(dataDir: string, stack: Stack, f: Filled, say: Say, restart: () => Promise<Stack>) {
  const n = f.cids.length;
  const metadata = (i: number) => pinMetadata({ account: f.users[i % USERS]!, record: `file:${f.fileIds[i]}` }, f.at0 + i);
  const cluster = createClusterClient(stack.endpoints.clusterApiUrl);
  const limit = pLimit(REST_CONCURRENCY);
  const pinRange = (from: number, to: number) =>
    Promise.all(Array.from({ length: to - from }, (_, k) => limit(() => cluster.pin(f.cids[from + k]!, asService(metadata(from + k))))));
  const t = Date.now();
  const rest = Math.min(REST_PINS, n);
  await pinRange(0, rest);
  const restPerSecond = rest / ((Date.now() - t) / 1000);
  say(`cluster: ${rest} pins through the REST API at ${restPerSecond.toFixed(1)}/s`);
  const imported = (n - rest) / restPerSecond > REST_BUDGET_S;
  if (!imported) {
    await pinRange(rest, n);
    return { stack, restPerSecond, imported };
  }
  const template = JSON.parse((await allocationLines(stack.endpoints.clusterApiUrl))[0]!) as Record<string, unknown>;
  const line = (i: number) =>
    JSON.stringify({
      ...template,
      cid: typeof template.cid === 'string' ? f.cids[i] : { '/': f.cids[i] },
      metadata: metadata(i),
      timestamp: new Date(f.at0 + i).toISOString(),
    });
  const file = path.join(path.dirname(dataDir), 'pinset.ndjson'); // in the run's directory, removed with it
  fs.writeFileSync(file, `${Array.from({ length: n }, (_, i) => line(i)).join('\n')}\n`);
  await stack.stop();
  await run(binaryPath('cluster', 'ipfs-cluster-service'), ['state', 'import', '--force', file], {
    env: childEnv(['CLUSTER_', 'IPFS_CLUSTER_'], { IPFS_CLUSTER_PATH: path.join(dataDir, 'cluster') }),
  });
  fs.rmSync(file);
  return { stack: await restart(), restPerSecond, imported };
}
