// `npm run chaos`: a mixed load (uploads into a folder, deletes, pin requests with and without
// origins, IPNS publishes, folder snapshots, S3 multipart uploads: scripts/chaos/s3.ts) against a stack of its own, during which each engine in turn is killed
// with SIGKILL and started again: Kubo, the Cluster peer, FerretDB, the Temporal server, the
// worker, the API. Then: every acknowledged upload is there with its bytes, every
// acknowledged delete is gone, every refused upload left no file, every pin asked for ends
// pinned, every completed multipart upload is its object, and the audit (npm run admin -- check) finds nothing. Printed per fault: requests
// during it, how they were answered (503s, with Retry-After or not; 500s; no answer; hangs),
// and the time from the kill until /readyz answered 200 again. Exit 0 only when nothing was
// lost, nothing answered 500 or hung, and the audit is clean.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { createUser } from '../../core/users.js';
import { loadConfig } from '../../infra/config.js';
import { openDatabase } from '../../infra/db/index.js';
import { auditJob, type AuditReport } from '../../infra/temporal/contracts/audit.js';
import { startChaosStack, type ChaosStack } from './engines.js';
import { createS3Load, type Answer } from './s3.js';

const LOOPS = 6;
const REQUEST_TIMEOUT_MS = 30_000;
const LOAD_BEFORE_MS = 5_000;
const DOWN_MS = 3_000;
const LOAD_AFTER_MS = 5_000;
// The sweep resumes a pin request left queued for a minute, in its round each minute.
const SWEEP_SETTLE_MS = 135_000;

interface Sent {
  op: string;
  at: number;
  answer: Answer;
  status: number;
  /** How long until it was answered (or given up on). */
  ms: number;
}
interface Upload {
  content: string;
  at: number;
  answer: Answer;
  id?: string;
  cid?: string;
  deleted?: boolean;
  /** A delete whose answer was lost: either outcome is right. */
  maybeDeleted?: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-chaos-'));
  process.stderr.write(`[chaos] stack in ${dataDir}\n`);
  const stack = await startChaosStack(dataDir);
  let code = 1;
  try {
    code = await run(stack);
    return code;
  } finally {
    await stack.stop();
    // Kept when something was wrong: the engines' logs are in <dir>/logs.
    if (code === 0) fs.rmSync(dataDir, { recursive: true, force: true });
    else process.stderr.write(`[chaos] kept ${dataDir} (logs in ${path.join(dataDir, 'logs')})\n`);
  }
}

async function run(stack: ChaosStack): Promise<number> {
  const config = loadConfig(stack.env);
  const db = await openDatabase(config.mongodbUri);
  const { apiKey, keyPrefix } = await createUser(
    { db, config },
    { email: `chaos-${Date.now()}@example.test`, name: 'Chaos', plan: 'nirvana' },
  );
  await db.close();

  const sent: Sent[] = [];
  const s3 = createS3Load(stack.s3Url, { accessKeyId: keyPrefix, secretAccessKey: apiKey }, (op, at, answer, status, ms) =>
    sent.push({ op, at, answer, status, ms }),
  );
  const uploads: Upload[] = [];
  const pins: string[] = [];
  const request = async (op: string, method: string, url: string, body?: unknown) => {
    const at = Date.now();
    let answer: Answer;
    let status = 0;
    let json: Record<string, unknown> | undefined;
    try {
      const res = await fetch(`${stack.apiUrl}${url}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      status = res.status;
      json = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
      answer = res.ok
        ? 'ok'
        : status === 503
          ? res.headers.get('retry-after')
            ? '503'
            : '503 without Retry-After'
          : status >= 500
            ? '500'
            : '4xx';
    } catch (err) {
      answer = (err as Error).name === 'TimeoutError' ? 'hang' : 'no answer';
    }
    sent.push({ op, at, answer, status, ms: Date.now() - at });
    // As a client would: a moment's pause after a refusal or a lost connection, not a spin.
    if (answer !== 'ok' && answer !== '4xx') await sleep(answer === 'no answer' ? 100 : 250);
    return { answer, json };
  };

  // Setup, before any fault: a folder to upload into and snapshot, a name to publish.
  const folderId = (await request('setup', 'POST', '/folders', { name: 'chaos' })).json?.folderId as string;
  const ipnsName = (await request('setup', 'POST', '/ipns/keys', { name: 'chaos' })).json?.ipnsName as string;
  if (!folderId || !ipnsName) throw new Error('setup failed: no folder or name');
  await s3.setup();
  // Pins with an origin name the stack's own Kubo, as a client names the node that has the content.
  const kuboId = (await fetch(`${stack.env.KUBO_API_URL}/api/v0/id`, { method: 'POST' }).then((r) => r.json())) as {
    ID: string;
    Addresses: string[];
  };
  const origin = kuboId.Addresses.find((a) => a.startsWith('/ip4/127.0.0.1/tcp/')) ?? `/ip4/127.0.0.1/tcp/4001/p2p/${kuboId.ID}`;

  let loading = true;
  const loop = async () => {
    while (loading) {
      const roll = Math.random();
      const live = uploads.filter((u) => u.answer === 'ok' && !u.deleted);
      if (roll < 0.5 || live.length === 0) {
        const content = `chaos ${crypto.randomUUID()}`;
        const upload: Upload = { content, at: Date.now(), answer: 'no answer' };
        uploads.push(upload);
        const { answer, json } = await request('upload', 'POST', '/upload/new', { content, name: `${content}.txt`, folderId });
        Object.assign(upload, { answer, id: json?.id, cid: json?.cid });
      } else if (roll < 0.65) {
        const victim = live[crypto.randomInt(live.length)]!;
        victim.deleted = true; // claimed: no other loop deletes it too
        const { answer } = await request('delete', 'DELETE', `/files/${victim.id}`);
        if (answer === 'no answer' || answer === 'hang') victim.maybeDeleted = true;
        else if (answer !== 'ok') victim.deleted = false;
      } else if (roll < 0.75) {
        // Content only Kubo has (added without a pin): a pin request fetches nothing.
        const added = await fetch(`${stack.env.KUBO_API_URL}/api/v0/add?pin=false&cid-version=1`, {
          method: 'POST',
          body: (() => {
            const form = new FormData();
            form.append('file', new Blob([crypto.randomBytes(256)]), 'x');
            return form;
          })(),
          signal: AbortSignal.timeout(5_000),
        }).then(
          (r) => r.json() as Promise<{ Hash: string }>,
          () => undefined,
        );
        if (added) {
          const origins = Math.random() < 0.5 ? [origin] : undefined;
          const { answer } = await request('pin', 'POST', '/pin', { cid: added.Hash, ...(origins ? { origins } : {}) });
          if (answer === 'ok') pins.push(added.Hash);
        }
      } else if (roll < 0.9) {
        await request('publish', 'POST', '/ipns/publish', { ipnsName, cid: live[crypto.randomInt(live.length)]!.cid });
      } else if (roll < 0.95) {
        await request('snapshot', 'POST', `/folders/${folderId}/snapshot`);
      } else {
        await s3.multipart();
      }
    }
  };
  const load = Promise.all(Array.from({ length: LOOPS }, loop));

  const faults: { engine: string; from: number; to: number; restartMs: number; recoverMs: number }[] = [];
  await sleep(LOAD_BEFORE_MS);
  for (const engine of stack.engines) {
    const from = Date.now();
    await engine.kill();
    process.stderr.write(`[chaos] killed ${engine.name}\n`);
    await sleep(DOWN_MS);
    const t = Date.now();
    await engine.start();
    const restartMs = Date.now() - t;
    for (;;) {
      const ready = await fetch(`${stack.apiUrl}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      await sleep(200);
    }
    const to = Date.now();
    faults.push({ engine: engine.name, from, to, restartMs, recoverMs: to - from });
    process.stderr.write(`[chaos] ${engine.name} back; ready ${((to - from) / 1000).toFixed(1)} s after the kill\n`);
    await sleep(LOAD_AFTER_MS);
  }
  loading = false;
  await load;

  // What must hold now.
  const problems: string[] = [];
  const started = sent[0]?.at ?? 0;
  /** When something happened, against the faults: `+12.3 s, 0.4 s after kill -9 kubo`. */
  const when = (at: number) => {
    const last = faults.filter((f) => f.from <= at).at(-1);
    return `+${((at - started) / 1000).toFixed(1)} s${last ? `, ${((at - last.from) / 1000).toFixed(1)} s after kill -9 ${last.engine}` : ''}`;
  };
  // The checks' reads wait out the plan's request rate (429) rather than count it against the service.
  const get = async (url: string): Promise<{ status: number; json?: Record<string, unknown> }> => {
    for (;;) {
      const res = await fetch(`${stack.apiUrl}${url}`, {
        headers: { authorization: `Bearer ${apiKey}` },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const json = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
      if (res.status !== 429 && res.status !== 503) return { status: res.status, json };
      await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
    }
  };
  for (const cid of pins) {
    const deadline = Date.now() + 120_000;
    let status = '';
    while (Date.now() < deadline && status !== 'pinned') {
      status = String((await get(`/pin/${cid}`)).json?.status ?? '');
      if (status !== 'pinned') await sleep(500);
    }
    if (status !== 'pinned') problems.push(`pin ${cid} is ${status || 'gone'}, not pinned`);
  }
  for (const u of uploads) {
    if (u.answer === 'ok') {
      const file = await get(`/files/${u.id}`);
      if (u.deleted && !u.maybeDeleted && file.status !== 404) problems.push(`deleted file ${u.id} answers ${file.status}, not 404`);
      if (!u.deleted || (u.maybeDeleted && file.status === 200)) {
        const bytes = await fetch(`${stack.env.KUBO_API_URL}/api/v0/cat?arg=${u.cid}`, { method: 'POST' }).then((r) => r.text());
        if ((file.status !== 200 && !(u.maybeDeleted && file.status === 404)) || bytes !== u.content)
          problems.push(
            `acknowledged file ${u.id} (${u.cid}, uploaded ${when(u.at)}) answers ${file.status}; bytes in Kubo ${bytes === u.content ? 'right' : 'wrong'}`,
          );
      }
    } else if (u.answer !== 'no answer' && u.answer !== 'hang') {
      // Refused: the content's CID must have no file. Unique content, so only this request could have made one.
      const hashed = await fetch(`${stack.env.KUBO_API_URL}/api/v0/add?only-hash=true&cid-version=1&raw-leaves=true`, {
        method: 'POST',
        body: (() => {
          const form = new FormData();
          form.append('file', new Blob([u.content]), 'x');
          return form;
        })(),
      }).then((r) => r.json() as Promise<{ Hash: string }>);
      const listed = (await get(`/upload/list?cid=${hashed.Hash}`)).json as { items?: unknown[] } | undefined;
      if ((listed?.items?.length ?? 0) > 0) problems.push(`refused upload (${u.answer}, sent ${when(u.at)}) of ${hashed.Hash} left a file`);
    }
  }
  problems.push(...(await s3.problems()));
  // The audit, once the sweep has had a round after the last fault (it runs each minute and
  // repairs what the change log shows): what it finds is what the service did not heal by
  // itself. Then `check --repair`, and the audit again, which must find nothing.
  await sleep(SWEEP_SETTLE_MS);
  const connection = await Connection.connect({ address: stack.env.TEMPORAL_ADDRESS! });
  const audits: AuditReport[] = [];
  try {
    const client = new Client({ connection });
    for (const repair of [false, true, false]) {
      audits.push(
        await client.workflow.execute(auditJob.workflowType, {
          workflowId: `chaos-audit-${Date.now()}`,
          taskQueue: config.temporal.taskQueue,
          args: [{ repair }],
        }),
      );
      if (repair) await sleep(10_000); // the repairs' syncs and recoveries run
    }
  } finally {
    await connection.close();
  }
  const [audit, repaired, after] = audits as [AuditReport, AuditReport, AuditReport];
  const healed = audit.disagreements.map((d) => `${d.kind} ${d.subject}: ${d.detail}`);
  for (const d of after.disagreements) problems.push(`audit after --repair: ${d.kind} ${d.subject}: ${d.detail}`);
  // Uploads whose answer was lost (the API killed mid-request) may or may not have been stored:
  // either is right, as long as the audit agrees with what is there.

  // The report.
  const count = (list: Sent[], answer: Answer) => list.filter((s) => s.answer === answer).length;
  const rows = faults.map((f) => {
    const during = sent.filter((s) => s.at >= f.from && s.at <= f.to);
    return {
      fault: `kill -9 ${f.engine}`,
      requests: during.length,
      ok: count(during, 'ok'),
      '503': count(during, '503'),
      '503 no Retry-After': count(during, '503 without Retry-After'),
      '500': count(during, '500'),
      'no answer': count(during, 'no answer'),
      hang: count(during, 'hang'),
      'restart s': (f.restartMs / 1000).toFixed(1),
      'ready after kill s': (f.recoverMs / 1000).toFixed(1),
    };
  });
  console.table(rows);
  const acked = uploads.filter((u) => u.answer === 'ok');
  console.log(
    `requests ${sent.length}; uploads acknowledged ${acked.length} (${acked.filter((u) => u.deleted).length} then deleted), ` +
      `refused ${uploads.filter((u) => u.answer !== 'ok' && u.answer !== 'no answer' && u.answer !== 'hang').length}, ` +
      `unanswered ${uploads.filter((u) => u.answer === 'no answer').length}; pins asked ${pins.length}; ` +
      `multipart uploads ${s3.objects.length} (${s3.objects.filter((o) => o.completed).length} completed); ` +
      `audit compared ${JSON.stringify(audit.checked)}`,
  );
  // The slowest answer of each kind of request, and when it was sent.
  const slowest = new Map<string, Sent>();
  for (const s of sent) if (s.answer !== 'hang' && s.ms > (slowest.get(s.op)?.ms ?? -1)) slowest.set(s.op, s);
  console.log(`slowest answers: ${[...slowest].map(([op, s]) => `${op} ${(s.ms / 1000).toFixed(1)} s (sent ${when(s.at)})`).join('; ')}`);
  const wrong = sent.filter((s) => s.answer === '500' || s.answer === 'hang' || s.answer === '503 without Retry-After');
  for (const s of wrong) console.log(`${s.answer}: ${s.op} sent ${when(s.at)} (status ${s.status})`);
  const bad = wrong.length;
  console.log(
    healed.length === 0
      ? 'the audit found nothing'
      : `the audit found ${healed.length}, --repair repaired ${repaired.repaired}:\n  ${healed.join('\n  ')}`,
  );
  console.log(problems.length === 0 ? 'lost: nothing; after --repair the audit finds nothing' : `problems:\n  ${problems.join('\n  ')}`);
  return problems.length === 0 && bad === 0 && healed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`[chaos] ${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
