// The REST API as an Express app, built from its components (no globals), so tests run it
// in-process against the real stack on an ephemeral port.
import fs from 'node:fs';
import path from 'node:path';
import express, { type Express } from 'express';
import { pinoHttp } from 'pino-http';
import type { Config } from '../infra/config.js';
import type { Database } from '../infra/db/index.js';
import type { Logger } from '../infra/logger.js';
import { checkCluster, type ClusterClient } from '../infra/cluster.js';
import { checkKubo, type Kubo } from '../infra/kubo.js';
import type { Temporal } from '../infra/temporal.js';
import type { Jobs } from '../infra/jobs.js';
import { projectRoot } from '../infra/paths.js';
import { apiKeyRoutes } from './apikeys/routes.js';
import { fileRoutes } from './files/routes.js';
import { pinRoutes } from './pins/routes.js';
import { uploadRoutes } from './uploads/routes.js';
import { healthRoutes } from './health/routes.js';
import { authenticate } from './http/auth.js';
import { errorHandler, notFoundHandler } from './http/error-handler.js';
import { createMetrics } from './http/metrics.js';
import { rateLimit } from './http/rate-limit.js';
import { resource } from './http/routing.js';

export interface AppDeps {
  config: Config;
  logger: Logger;
  db: Database;
  temporal: Temporal;
  jobs: Jobs;
  kubo: Kubo;
  cluster: ClusterClient;
}

export const openApiPath = path.join(projectRoot, 'api/openapi.json');

export function createApp(deps: AppDeps): Express {
  const { config, logger, db } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  const metrics = createMetrics();
  app.use(metrics.middleware);
  app.use(
    pinoHttp({
      logger,
      // Only method and path: headers carry credentials and query strings carry tokens.
      serializers: {
        req: (req: { id: unknown; method: string; url: string }) => ({ id: req.id, method: req.method, path: req.url.split('?')[0] }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      autoLogging: { ignore: (req) => req.url === '/healthz' || req.url === '/metrics' },
    }),
  );

  const unauthenticated = express.Router();
  unauthenticated.use(
    healthRoutes(
      {
        mongodb: () => db.ping(),
        temporal: (ms) => deps.temporal.check(ms),
        kubo: (ms) => checkKubo(deps.kubo, ms),
        cluster: (ms) => checkCluster(deps.cluster, ms),
      },
      metrics.registry,
    ),
  );
  const openApi = fs.readFileSync(openApiPath, 'utf8');
  resource(unauthenticated, '/openapi.json', { get: (_req, res) => void res.type('application/json').send(openApi) });
  app.use(unauthenticated);

  // Each feature router puts `guard` in front of its own paths, so a path that matches
  // nothing is 404 with or without a key.
  const guard = [authenticate(db, config.plans), rateLimit(db.rateLimits)];
  const options = { guard, jsonLimit: config.api.jsonBodyLimit };
  const content = { db, jobs: deps.jobs };
  app.use(apiKeyRoutes({ db, masterKey: config.masterKey }, options));
  app.use(
    uploadRoutes(
      { ...content, kubo: deps.kubo, kuboApiUrl: config.kubo.apiUrl, gatewayUrl: config.gatewayUrl },
      { ...options, uploadJsonLimit: config.uploads.jsonLimit },
    ),
  );
  app.use(fileRoutes({ db, gatewayUrl: config.gatewayUrl }, options));
  app.use(pinRoutes({ ...content, pinTimeoutMs: config.pins.timeoutMs }, options));

  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  return app;
}
