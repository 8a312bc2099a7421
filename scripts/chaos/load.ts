// The chaos run itself, shared by `npm run chaos` (run.ts) and tests/temporal-cluster.test.ts: a
// mixed load (uploads into a folder, deletes, pin requests with and without origins, pins that
// wait for an origin that is offline until the faults are over, IPNS publishes, snapshots of
// the folder and of one of 1,000 files, S3 multipart uploads: s3.ts) during which each of the
// stack's faults in turn is applied and undone. Then: every acknowledged upload is there with
// its bytes, every acknowledged delete is gone, every refused upload left no file, every pin
// asked for ends pinned, every snapshot asked for is made, every completed multipart upload is
// its object, and the audit finds nothing. The report says what went wrong and, per fault, how
// requests were answered and how long until /readyz answered 200 again.
import crypto from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { createUser } from '../../core/users.js';
import { loadConfig } from '../../infra/config.js';
import { openDatabase } from '../../infra/db/index.js';
import { auditJob, type AuditReport } from '../../infra/temporal/contracts/audit.js';
import type { ChaosStack } from './engines.js';
import { createS3Load, type Answer } from './s3.js';

const LOOPS = 6;
const REQUEST_TIMEOUT_MS = 30_000;
const LOAD_BEFORE_MS = 5_000;
const DOWN_MS = 3_000;
const LOAD_AFTER_MS = 5_000;
// The sweep resumes a pin request left queued for a minute, in its round each minute.
const SWEEP_SETTLE_MS = 135_000;
/** The large folder's files, and the pins that wait for the offline origin. */
const LARGE_FOLDER_FILES = 1000;
const WAITING_PINS = 4;

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

export interface ChaosReport {
  /** Lost or wrong outcomes; empty when every acknowledged operation holds. */
  problems: string[];
  /** Answers no client should get: 500s, hangs, 503s without Retry-After. */
  wrong: string[];
  /** What the first audit found (the service did not heal it by itself). */
  healed: string[];
  /** Per fault: requests during it and how they were answered; restart and recovery times. */
  rows: Record<string, string | number>[];
  summary: string;
  slowest: string;
  /** What the load made, for further checks (tests look these up in Temporal's visibility). */
  made: { userId: string; folderId: string; largeFolderId: string; ipnsName: string; pinned: string[]; waited: string[] };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(stack: ChaosStack, say: (line: string) => void): Promise<ChaosReport> {
  const config = loadConfig(stack.env);
  const db = await openDatabase(config.mongodbUri);
  const { user, apiKey, keyPrefix } = await createUser(
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
  /** The acknowledged pins of content only the offline origin had (each a workflow that waited). */
  const waited: string[] = [];
  /** Snapshots of the folder of 1,000 files asked for and acknowledged (it never changes, so each must complete). */
  let largeSnapshots = 0;
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
  /** Setup requests, before any fault: each must succeed. */
  const setup = async (method: string, url: string, body?: unknown) => {
    const { answer, json } = await request('setup', method, url, body);
    if (answer !== 'ok' || !json) throw new Error(`setup: ${method} ${url} answered ${answer}`);
    return json;
  };

  // Setup: a folder to upload into and snapshot, a name to publish, a folder of 1,000 files to
  // snapshot during the faults, and content that only the origin has, which then goes offline.
  const folderId = (await setup('POST', '/folders', { name: 'chaos' })).folderId as string;
  const ipnsName = (await setup('POST', '/ipns/keys', { name: 'chaos' })).ipnsName as string;
  const largeId = (await setup('POST', '/folders', { name: 'chaos-large' })).folderId as string;
  const t = Date.now();
  for (let i = 0; i < LARGE_FOLDER_FILES; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) =>
        setup('POST', '/upload/new', { content: `large ${i + j} ${crypto.randomUUID()}`, name: `f${i + j}.txt`, folderId: largeId }),
      ),
    );
  }
  say(`${LARGE_FOLDER_FILES} files uploaded for the large snapshot in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  await s3.setup();
  const waiting = await Promise.all(Array.from({ length: WAITING_PINS }, () => stack.origin.add(crypto.randomBytes(300_000))));
  await stack.origin.stop();
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
        const next = waiting.shift();
        if (next) {
          // Content only the offline origin has: the pin waits for it across the faults.
          const { answer } = await request('pin (waits for origin)', 'POST', '/pin', { cid: next, origins: [stack.origin.swarmAddress] });
          if (answer === 'ok') {
            pins.push(next);
            waited.push(next);
          } else waiting.push(next);
          continue;
        }
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
        // Mostly the small folder; one in five the folder of 1,000 files.
        const target = Math.random() < 0.2 ? largeId : folderId;
        const { answer } = await request(target === largeId ? 'snapshot (1,000 files)' : 'snapshot', 'POST', `/folders/${target}/snapshot`);
        if (answer === 'ok' && target === largeId) largeSnapshots++;
      } else {
        await s3.multipart();
      }
    }
  };
  const load = Promise.all(Array.from({ length: LOOPS }, loop));

  const faults: { engine: string; from: number; to: number; restartMs: number; recoverMs: number }[] = [];
  await sleep(LOAD_BEFORE_MS);
  for (const engine of stack.faults) {
    const from = Date.now();
    await engine.kill();
    say(`killed ${engine.name}`);
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
    say(`${engine.name} back; ready ${((to - from) / 1000).toFixed(1)} s after the fault`);
    await sleep(LOAD_AFTER_MS);
  }
  loading = false;
  await load;
  // The origin comes back: the pins that waited for it through every fault can finish now.
  await stack.origin.start();

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
  /** Polls `url` until `done` holds (up to 2 minutes); the last answer. */
  const until = async (url: string, done: (json?: Record<string, unknown>) => boolean) => {
    const deadline = Date.now() + 120_000;
    let last = await get(url);
    while (Date.now() < deadline && !done(last.json)) {
      await sleep(500);
      last = await get(url);
    }
    return last;
  };
  for (const cid of pins) {
    const status = String((await until(`/pin/${cid}`, (j) => j?.status === 'pinned')).json?.status ?? '');
    if (status !== 'pinned') problems.push(`pin ${cid} is ${status || 'gone'}, not pinned`);
  }
  if (largeSnapshots === 0) await setup('POST', `/folders/${largeId}/snapshot`); // asked at least once
  const job = (await until(`/folders/${largeId}/snapshot`, (j) => j?.status === 'complete')).json;
  const fileCount = (job?.snapshot as { fileCount?: number } | undefined)?.fileCount;
  if (job?.status !== 'complete' || fileCount !== LARGE_FOLDER_FILES)
    problems.push(`the snapshot of ${LARGE_FOLDER_FILES} files is ${String(job?.status)} with ${fileCount} files`);
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
    const client = new Client({ connection, namespace: config.temporal.namespace });
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

  const count = (list: Sent[], answer: Answer) => list.filter((s) => s.answer === answer).length;
  const rows = faults.map((f) => {
    const during = sent.filter((s) => s.at >= f.from && s.at <= f.to);
    return {
      fault: f.engine,
      requests: during.length,
      ok: count(during, 'ok'),
      '503': count(during, '503'),
      '503 no Retry-After': count(during, '503 without Retry-After'),
      '500': count(during, '500'),
      'no answer': count(during, 'no answer'),
      hang: count(during, 'hang'),
      'restart s': (f.restartMs / 1000).toFixed(1),
      'ready after fault s': (f.recoverMs / 1000).toFixed(1),
    };
  });
  const acked = uploads.filter((u) => u.answer === 'ok');
  const summary =
    `requests ${sent.length}; uploads acknowledged ${acked.length} (${acked.filter((u) => u.deleted).length} then deleted), ` +
    `refused ${uploads.filter((u) => u.answer !== 'ok' && u.answer !== 'no answer' && u.answer !== 'hang').length}, ` +
    `unanswered ${uploads.filter((u) => u.answer === 'no answer').length}; pins asked ${pins.length} ` +
    `(${WAITING_PINS - waiting.length} waiting for the origin); snapshots of 1,000 files ${largeSnapshots}; ` +
    `multipart uploads ${s3.objects.length} (${s3.objects.filter((o) => o.completed).length} completed); ` +
    `audit compared ${JSON.stringify(audit.checked)}` +
    (healed.length ? `; the audit found ${healed.length}, --repair repaired ${repaired.repaired}` : '');
  const slowestByOp = new Map<string, Sent>();
  for (const s of sent) if (s.answer !== 'hang' && s.ms > (slowestByOp.get(s.op)?.ms ?? -1)) slowestByOp.set(s.op, s);
  const slowest = [...slowestByOp].map(([op, s]) => `${op} ${(s.ms / 1000).toFixed(1)} s (sent ${when(s.at)})`).join('; ');
  const wrong = sent
    .filter((s) => s.answer === '500' || s.answer === 'hang' || s.answer === '503 without Retry-After')
    .map((s) => `${s.answer}: ${s.op} sent ${when(s.at)} (status ${s.status})`);
  if (waiting.length > 0) problems.push(`${waiting.length} of the ${WAITING_PINS} pins that wait for the origin were never acknowledged`);
  return {
    problems,
    wrong,
    healed,
    rows,
    summary,
    slowest,
    made: { userId: user._id, folderId, largeFolderId: largeId, ipnsName, pinned: pins, waited },
  };
}
