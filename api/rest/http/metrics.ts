import type { RequestHandler } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DISAGREEMENT_KINDS, type AuditReport } from '../../../infra/temporal/contracts/audit.js';

/** A registry per app (tests run several apps in one process), with the process metrics. */
export function createMetrics(): { registry: Registry; middleware: RequestHandler } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'stupa_' });
  const duration = new Histogram({
    name: 'stupa_http_request_duration_seconds',
    help: 'HTTP requests of the REST API by route template, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  const middleware: RequestHandler = (req, res, next) => {
    const end = duration.startTimer();
    res.on('finish', () => {
      // The route template, not the URL, keeps label cardinality bounded.
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      end({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  };
  return { registry, middleware };
}

/**
 * The last audit's findings (infra/db/audits.ts), read at each scrape: disagreements per kind,
 * when it finished, and how many it repaired. Every kind is present (0 when none), so an alert
 * on `stupa_audit_disagreements > 0` needs no absent-series rule.
 */
export function registerAuditMetrics(registry: Registry, lastReport: () => Promise<AuditReport | null>): void {
  // Each gauge reads the report (one document by _id): prom-client collects them concurrently.
  const read = () => lastReport().catch(() => null);
  new Gauge({
    name: 'stupa_audit_disagreements',
    help: 'Disagreements the last audit found, by kind (npm run admin -- check)',
    labelNames: ['kind'] as const,
    registers: [registry],
    async collect() {
      const report = await read();
      this.reset();
      if (report) for (const kind of DISAGREEMENT_KINDS) this.set({ kind }, report.found[kind] ?? 0);
    },
  });
  new Gauge({
    name: 'stupa_audit_finished_timestamp_seconds',
    help: 'When the last audit finished (absent before the first)',
    registers: [registry],
    async collect() {
      const report = await read();
      this.reset();
      if (report) this.set(report.finishedAt / 1000);
    },
  });
  new Gauge({
    name: 'stupa_audit_repaired',
    help: 'Disagreements the last audit repaired (with --repair)',
    registers: [registry],
    async collect() {
      const report = await read();
      this.reset();
      if (report) this.set(report.repaired);
    },
  });
}

/** The MongoDB operations this process sent, by method and collection (infra/db/index.ts). */
export function registerDatabaseMetrics(registry: Registry, operations: () => ReadonlyMap<string, number>): void {
  new Counter({
    name: 'stupa_mongodb_operations_total',
    help: 'MongoDB operations sent by this process, by method and collection',
    labelNames: ['method', 'collection'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, count] of operations()) {
        const [method, collection] = key.split(' ');
        this.inc({ method, collection }, count);
      }
    },
  });
}
