// Operations endpoints, without authentication: liveness, readiness with each dependency
// checked, and Prometheus metrics.
import { Router } from 'express';
import type { Registry } from 'prom-client';
import { READY_CHECK_TIMEOUT_MS, RETRY_AFTER_UNAVAILABLE_S } from '../../infra/constants.js';
import { resource } from './http/routing.js';

/** A named check that throws when its dependency is not reachable. */
export type ReadinessCheck = (timeoutMs: number) => Promise<void>;

async function runCheck(check: ReadinessCheck): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${READY_CHECK_TIMEOUT_MS} ms`)), READY_CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(READY_CHECK_TIMEOUT_MS), timeout]);
    return 'ok';
  } catch (err) {
    return `unreachable: ${(err as Error).message.split('\n')[0]}`;
  } finally {
    clearTimeout(timer);
  }
}

export function healthRoutes(checks: Record<string, ReadinessCheck>, registry: Registry, draining: () => boolean = () => false): Router {
  const router = Router();

  resource(router, '/healthz', { get: (_req, res) => void res.json({ status: 'ok' }) });

  resource(router, '/readyz', {
    get: async (_req, res) => {
      if (draining()) {
        res
          .status(503)
          .set('Retry-After', String(RETRY_AFTER_UNAVAILABLE_S))
          .json({ error: { reason: 'DEPENDENCY_UNAVAILABLE', details: 'this process is shutting down' }, checks: {} });
        return;
      }
      const names = Object.keys(checks);
      const results = await Promise.all(names.map((name) => runCheck(checks[name]!)));
      const status = Object.fromEntries(names.map((name, i) => [name, results[i]!]));
      const down = names.filter((name) => status[name] !== 'ok');
      if (down.length === 0) {
        res.json({ status: 'ready', checks: status });
        return;
      }
      res
        .status(503)
        .set('Retry-After', String(RETRY_AFTER_UNAVAILABLE_S))
        .json({
          error: { reason: 'DEPENDENCY_UNAVAILABLE', details: `not reachable: ${down.join(', ')}` },
          checks: status,
        });
    },
  });

  resource(router, '/metrics', {
    get: async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    },
  });

  return router;
}
