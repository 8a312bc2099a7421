// Snapshot of a 10,000-file folder in two levels (100 subfolders of 100 files) against
// `ipfs add -r` of the same tree on the same Kubo. A snapshot links existing CIDs and reads no
// file byte, so the goal is to be faster than add -r, which reads and hashes every byte. The
// file records are written through the store (thousands of uploads would measure uploads); the
// CIDs must be equal, or the run is broken.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pLimit from 'p-limit';
import { parseCid } from '../../infra/ipfs/cid.js';
import { newFileId, type FileRecord } from '../../infra/db/files.js';
import { openDatabase } from '../../infra/db/index.js';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { binaryPath } from '../../stack/binaries.js';
import { apiCall, type BenchContext } from './harness.js';
import { pauseSweep } from './scale-service.js';

const exec = promisify(execFile);

export const SNAPSHOT_DIRS = 100;
export const SNAPSHOT_FILES_PER_DIR = 100;
/** Bytes of each file: small files, where reading them costs add -r least. */
export const SNAPSHOT_FILE_BYTES = 16 * 1024;

export interface SnapshotResult {
  files: number;
  snapshotSeconds: number;
  addSeconds: number;
  sameCid: boolean;
}

interface SnapshotJob {
  status: string;
  snapshot: { cid: string } | null;
}

export async function benchSnapshot(ctx: BenchContext, say: (line: string) => void): Promise<SnapshotResult> {
  const { user, endpoints, dataDir } = ctx;
  // Records written straight to the store hold content that Cluster does not have yet; the
  // minutely sweep would start a sync job for each, and measure that instead.
  await pauseSweep(endpoints.temporalAddress, endpoints.temporalNamespace);
  const db = await openDatabase(endpoints.mongodbUri);
  const kubo = createKubo(endpoints.kuboApiUrl);
  const disk = path.join(dataDir, 'snapshot-tree');
  try {
    const root = (await apiCall<{ folderId: string }>(ctx, 'POST', '/folders', { name: 'bench-snapshot' })).folderId;
    const limit = pLimit(16);
    const now = Date.now();
    const records: FileRecord[] = [];
    say(
      `snapshot: writing ${SNAPSHOT_DIRS * SNAPSHOT_FILES_PER_DIR} files of ${SNAPSHOT_FILE_BYTES / 1024} KiB in ${SNAPSHOT_DIRS} folders`,
    );
    for (let d = 0; d < SNAPSHOT_DIRS; d++) {
      const name = `dir-${String(d).padStart(3, '0')}`;
      const folderId = (await apiCall<{ folderId: string }>(ctx, 'POST', '/folders', { name, parentFolderId: root })).folderId;
      fs.mkdirSync(path.join(disk, name), { recursive: true });
      await Promise.all(
        Array.from({ length: SNAPSHOT_FILES_PER_DIR }, (_, f) =>
          limit(async () => {
            const i = d * SNAPSHOT_FILES_PER_DIR + f;
            const bytes = Buffer.alloc(SNAPSHOT_FILE_BYTES, `snapshot bench file ${i} `);
            const fileName = `file-${String(f).padStart(3, '0')}.bin`;
            fs.writeFileSync(path.join(disk, name, fileName), bytes);
            const cid = parseCid((await kubo.add(bytes, { cidVersion: 1, rawLeaves: true, pin: false })).cid.toString());
            records.push({
              _id: newFileId(),
              userId: user.userId,
              cid: cid.v1,
              multihash: cid.multihash,
              name: fileName,
              description: null,
              size: bytes.length,
              mimeType: 'application/octet-stream',
              folderId,
              metadata: {},
              createdAt: now + i,
              updatedAt: now + i,
            });
          }),
        ),
      );
    }
    for (let i = 0; i < records.length; i += 1000) await db.files.model.insertMany(records.slice(i, i + 1000), { ordered: false });

    const port = new URL(endpoints.kuboApiUrl).port;
    let t = Date.now();
    const { stdout } = await exec(binaryPath('kubo', 'ipfs'), [
      '--api',
      `/ip4/127.0.0.1/tcp/${port}`,
      'add',
      '-r',
      '--hidden',
      '--pin=false',
      '-Q',
      disk,
    ]);
    const addSeconds = (Date.now() - t) / 1000;
    const expected = parseCid(stdout.trim()).v1;
    say(`snapshot: ipfs add -r ${addSeconds.toFixed(1)} s (${expected})`);

    t = Date.now();
    await apiCall(ctx, 'POST', `/folders/${root}/snapshot`);
    let job: SnapshotJob;
    for (;;) {
      job = await apiCall<SnapshotJob>(ctx, 'GET', `/folders/${root}/snapshot`);
      if (job.status === 'complete') break;
      if (Date.now() - t > 30 * 60_000) throw new Error(`the snapshot did not complete in 30 min: ${JSON.stringify(job)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const snapshotSeconds = (Date.now() - t) / 1000;
    say(`snapshot: complete and pinned in ${snapshotSeconds.toFixed(1)} s (${job.snapshot?.cid})`);
    return { files: records.length, snapshotSeconds, addSeconds, sameCid: job.snapshot?.cid === expected };
  } finally {
    await db.close();
    fs.rmSync(disk, { recursive: true, force: true });
  }
}
