// The webhook tests' stack and receiver: a test file's API and worker process on a task queue of
// its own, with private addresses allowed (WEBHOOK_ALLOW_PRIVATE) and a user of a plan that takes
// webhooks, started before its tests (useWebhookStack) and stopped after them, the bindings set
// once they start; and a receiver on loopback that keeps every request, with when it came, and
// answers with the status `answer` gives for the request's path and its count there.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApiServer } from '../../api/server.js';
import { createUser, plansFile, startTestApi, testEnv, type TestUser } from './stack.js';
import { startWorkerProcess, type WorkerProcess } from './worker.js';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** When it came (ms). */
  at: number;
}

export function receiver(answer: (path: string, n: number) => number = () => 200) {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const path = req.url ?? '/';
      got.push({ path, headers: req.headers as Record<string, string>, body, at: Date.now() });
      res.statusCode = answer(path, got.filter((g) => g.path === path).length);
      res.end('ok');
    });
  });
  return {
    got,
    at: (path: string) => got.filter((g) => g.path === path),
    listen: (port = 0) => new Promise<number>((r) => server.listen(port, '127.0.0.1', () => r((server.address() as AddressInfo).port))),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export let env: Record<string, string | undefined>;
export let api: ApiServer;
export let worker: WorkerProcess;
export let user: TestUser;
/** The receiver's port. */
export let port: number;

/** Starts the file's stack and `hooks` before its tests, with `extraEnv` besides the defaults above. */
export function useWebhookStack(hooks: ReturnType<typeof receiver>, extraEnv: Record<string, string> = {}): void {
  beforeAll(async () => {
    env = testEnv({
      TEMPORAL_TASK_QUEUE: `webhooks-${crypto.randomUUID()}`,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      PLANS_FILE: plansFile({ bodhi: { storageMB: 1, webhooks: 6 } }),
      ...extraEnv,
    });
    [api, worker, port] = await Promise.all([startTestApi(env), startWorkerProcess(env), hooks.listen()]);
    user = await createUser(api, 'bodhi');
  }, 120_000);
  afterAll(async () => {
    await Promise.all([api?.close(), worker?.kill(), hooks.close()]);
  });
}

/** Kills the worker with SIGKILL; `restartWorker` starts another on the same task queue. */
export const killWorker = () => worker.kill('SIGKILL');
export async function restartWorker(): Promise<void> {
  worker = await startWorkerProcess(env);
}
