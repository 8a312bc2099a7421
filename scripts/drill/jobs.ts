// The long jobs the upgrade drill (upgrade.ts) puts in flight on the old version and checks on
// the new one, and the load it keeps up through the switch. Everything goes through the edge,
// as a client's requests would.
import crypto from 'node:crypto';
import http from 'node:http';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { createKubo } from '../../infra/ipfs/kubo.js';
import { readIpnsRecord } from '../../infra/ipfs/ipns.js';

export interface Account {
  apiKey: string;
  keyPrefix: string;
}

export interface EdgeUrls {
  api: string;
  s3: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers of several shapes, read field by field
async function json(url: string, key: string, method = 'GET', body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: { 'X-Api-Key': key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    return { status: res.status, body: text };
  }
}

/** Polls until `done` holds or `ms` pass; the last value either way. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms: number): Promise<{ value: T; ok: boolean; ms: number }> {
  const start = Date.now();
  for (;;) {
    const value = await read().catch(() => undefined as T);
    if (value !== undefined && done(value)) return { value, ok: true, ms: Date.now() - start };
    if (Date.now() - start > ms) return { value, ok: false, ms: Date.now() - start };
    await sleep(250);
  }
}

/** Requests at a steady pace from `clients` loops: uploads and reads of what was uploaded (about
 * 60 a second with 4, under the nirvana plan's 100 a second: a 429 would be a failure). */
export function startLoad(urls: EdgeUrls, account: Account, clients = 4) {
  const counts = { requests: 0, ok: 0, status5xx: 0, status4xx: 0, refused: 0, errors: [] as string[] };
  let running = true;
  const loops = Array.from({ length: clients }, async (_, n) => {
    const cids: string[] = [];
    for (let i = 0; running; i++) {
      const read = i % 2 === 1 && cids.length > 0;
      counts.requests++;
      try {
        const res = read
          ? await json(`${urls.api}/files/${cids[crypto.randomInt(cids.length)]}`, account.apiKey)
          : await json(`${urls.api}/upload/new`, account.apiKey, 'POST', {
              content: `drill ${n}.${i} ${crypto.randomUUID()}`,
              name: `d${n}-${i}.txt`,
            });
        if (res.status >= 500) {
          counts.status5xx++;
          counts.errors.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        } else if (res.status >= 400) {
          counts.status4xx++;
          counts.errors.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        } else {
          counts.ok++;
          if (!read) cids.push(res.body.cid as string);
        }
      } catch (err) {
        counts.refused++;
        counts.errors.push(String((err as { cause?: unknown }).cause ?? err));
      }
      await sleep(40);
    }
  });
  return {
    counts,
    async stop() {
      running = false;
      await Promise.all(loops);
      return counts;
    },
  };
}

/** A webhook endpoint that answers 500 until told to accept, and records what it accepted. */
export async function flakyEndpoint(): Promise<{
  url: string;
  accept(): void;
  received: string[];
  failed: () => number;
  close(): Promise<void>;
}> {
  let accepting = false;
  let failed = 0;
  const received: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!accepting) {
        failed++;
        res.writeHead(500).end();
        return;
      }
      received.push(body);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    accept: () => void (accepting = true),
    received,
    failed: () => failed,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const PART = 5 * 1024 * 1024;

/** The jobs started on the old version: each returns the check the new version must pass. */
export async function startJobs(urls: EdgeUrls, account: Account, kuboApiUrl: string, hook: Awaited<ReturnType<typeof flakyEndpoint>>) {
  const key = account.apiKey;
  // A pin waiting for content nobody has yet.
  const awaited = `arrives after the upgrade ${crypto.randomUUID()}`;
  const kubo = createKubo(kuboApiUrl);
  const awaitedCid = (await kubo.add(awaited, { onlyHash: true, cidVersion: 1, rawLeaves: true })).cid.toString();
  const pin = await json(`${urls.api}/psa/pins`, key, 'POST', { cid: awaitedCid, name: 'awaited' });
  if (pin.status !== 202) throw new Error(`pin answered ${pin.status}: ${JSON.stringify(pin.body)}`);

  // A webhook whose endpoint fails, on the publish of an IPNS name: its delivery job retries
  // (the load's uploads make no such event). The name is then republished on a schedule.
  const webhook = await json(`${urls.api}/webhooks`, key, 'POST', { url: hook.url, events: ['ipns.published'] });
  if (webhook.status !== 201) throw new Error(`webhook answered ${webhook.status}: ${JSON.stringify(webhook.body)}`);
  const name = await json(`${urls.api}/ipns/keys`, key, 'POST', { name: 'drill' });
  const target = await json(`${urls.api}/upload/new`, key, 'POST', { content: `named ${crypto.randomUUID()}`, name: 'named.txt' });
  const published = await json(`${urls.api}/ipns/publish`, key, 'POST', { ipnsName: name.body.ipnsName, cid: target.body.cid });
  if (published.status !== 200) throw new Error(`publish answered ${published.status}: ${JSON.stringify(published.body)}`);
  await until(
    async () => hook.failed(),
    (n) => n >= 1,
    30_000,
  );

  // A multipart upload with its first part.
  const s3 = new S3Client({
    endpoint: urls.s3,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: account.keyPrefix, secretAccessKey: key },
  });
  const bucket = `upgrade-${crypto.randomBytes(4).toString('hex')}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const parts = [crypto.randomBytes(PART), crypto.randomBytes(1024 * 1024)];
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'across.bin' }));
  const first = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'across.bin', UploadId, PartNumber: 1, Body: parts[0] }));

  /** After the switch: each job completes on the new version. */
  return async function finish(): Promise<Record<string, { ok: boolean; ms: number; detail: string }>> {
    const results: Record<string, { ok: boolean; ms: number; detail: string }> = {};
    await kubo.add(awaited, { cidVersion: 1, rawLeaves: true });
    const pinned = await until(
      async () => (await json(`${urls.api}/psa/pins/${pin.body.requestid}`, key)).body.status as string,
      (s) => s === 'pinned',
      120_000,
    );
    results.pin = { ok: pinned.ok, ms: pinned.ms, detail: `status ${pinned.value}` };

    const second = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'across.bin', UploadId, PartNumber: 2, Body: parts[1] }));
    const t = Date.now();
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: 'across.bin',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: first.ETag },
            { PartNumber: 2, ETag: second.ETag },
          ],
        },
      }),
    );
    const object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'across.bin' }));
    const same = Buffer.from(await object.Body!.transformToByteArray()).equals(Buffer.concat(parts));
    results.multipart = { ok: same, ms: Date.now() - t, detail: same ? 'bytes read back equal' : 'bytes differ' };
    s3.destroy();

    hook.accept();
    const delivered = await until(
      async () => hook.received.filter((b) => b.includes(name.body.ipnsName as string)).length,
      (n) => n >= 1,
      120_000,
    );
    results.webhook = {
      ok: delivered.ok,
      ms: delivered.ms,
      detail: `${hook.failed()} failed attempts, then ${delivered.ok ? 'delivered' : 'not delivered'}`,
    };

    // A republish after the switch: Kubo's record of the name gets a later validity.
    const record = async () => {
      const res = await fetch(new URL(`/api/v0/routing/get?arg=/ipns/${name.body.ipnsName}`, kuboApiUrl), { method: 'POST' });
      const extra = (JSON.parse((await res.text()).trim().split('\n').pop()!) as { Extra: string }).Extra;
      return readIpnsRecord(Buffer.from(extra, 'base64'));
    };
    const before = await record();
    const republished = await until(record, (r) => r.validity !== before.validity && r.value === `/ipfs/${target.body.cid}`, 60_000);
    results.republish = { ok: republished.ok, ms: republished.ms, detail: `sequence ${republished.value?.sequence}` };
    return results;
  };
}
