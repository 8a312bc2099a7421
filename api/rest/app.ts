// The REST API as an Express app, built from the use-cases' components (no globals), so tests
// run it in-process against the real stack on an ephemeral port. Each capability's router is
// one file here; what it does is in the same-named use-case (core/).
import fs from 'node:fs';
import path from 'node:path';
import express, { type Express } from 'express';
import { requestLog } from '../http.js';
import { checkCluster, type ClusterClient } from '../../infra/ipfs/cluster.js';
import { checkKubo } from '../../infra/ipfs/kubo.js';
import { checkKuboGateway } from '../../infra/ipfs/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import { projectRoot } from '../../infra/paths.js';
import type { Temporal } from '../../infra/temporal/client.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { analyticsRoutes } from './analytics.js';
import { apiKeyRoutes } from './apikeys.js';
import { consoleRoutes } from './console.js';
import { corsRoutes } from './cors.js';
import { errorHandler, notFoundHandler } from './errors.js';
import { fileRoutes } from './files.js';
import { folderRoutes } from './folders.js';
import { gatewayRoutes } from './gateway.js';
import { healthRoutes } from './health.js';
import { imageRoutes } from './images.js';
import { guard } from './http/auth.js';
import { crossOrigin } from './http/cross-origin.js';
import { createMetrics, registerAuditMetrics, registerDatabaseMetrics } from './http/metrics.js';
import { resource } from './http/routing.js';
import { ipnsRoutes } from './ipns.js';
import { pinRoutes } from './pins.js';
import { signedTokenRoutes } from './signed-tokens.js';
import { psaRoutes } from '../psa/routes.js';
import { uploadRoutes } from './uploads/routes.js';
import { webhookRoutes } from './webhooks.js';

export interface AppDeps extends UseCaseDeps {
  /** `draining`: the process is stopping (server.ts close): /readyz answers 503. */
  lifecycle?: { draining: boolean };
  logger: Logger;
  temporal: Temporal;
  cluster: ClusterClient;
}

export const openApiPath = path.join(projectRoot, 'api/rest/openapi.json');

export function createApp(deps: AppDeps): Express {
  const { config, logger, db } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  const metrics = createMetrics();
  registerAuditMetrics(metrics.registry, () => db.audits.last());
  registerDatabaseMetrics(metrics.registry, db.operations);
  app.use(metrics.middleware);
  app.use(requestLog(logger, ['/healthz', '/readyz', '/metrics']));

  app.use(crossOrigin);

  const unauthenticated = express.Router();
  unauthenticated.use(
    healthRoutes(
      {
        mongodb: () => db.ping(),
        temporal: (ms) => deps.temporal.check(ms),
        kubo: (ms) => checkKubo(deps.kubo, ms),
        // The gateway and S3 read content from Kubo's gateway, not its RPC API.
        kuboGateway: (ms) => checkKuboGateway(config.kubo.gatewayUrl, ms),
        cluster: (ms) => checkCluster(deps.cluster, ms),
      },
      metrics.registry,
      () => deps.lifecycle?.draining === true,
    ),
  );
  const openApi = fs.readFileSync(openApiPath, 'utf8');
  resource(unauthenticated, '/openapi.json', { get: (_req, res) => void res.type('application/json').send(openApi) });
  unauthenticated.use(consoleRoutes(config));
  app.use(unauthenticated);

  // Each capability's router puts the guard in front of its own paths, so a path that matches
  // nothing is 404 with or without a key. No two routers share a path, so their order is only
  // a cost: every router a request passes costs it a few path matches, and the status reads
  // clients poll (GET /pin/:cid, /file/:cid) come first.
  const options = { guard: guard(deps), jsonLimit: config.api.jsonBodyLimit };
  app.use(pinRoutes(deps, options));
  app.use(fileRoutes(deps, options));
  app.use(uploadRoutes(deps, { ...options, uploadJsonLimit: config.uploads.jsonLimit }));
  app.use(apiKeyRoutes(deps, options));
  app.use(signedTokenRoutes(deps, options));
  app.use(folderRoutes(deps, options));
  app.use(ipnsRoutes(deps, options));
  app.use(corsRoutes(deps, options));
  app.use(gatewayRoutes(deps, options));
  app.use(analyticsRoutes(deps, options));
  app.use(webhookRoutes(deps, options));
  app.use(imageRoutes(deps, { ...options, registry: metrics.registry }));
  // The pinning service API: its own surface, under /psa.
  app.use('/psa', psaRoutes(deps, options));

  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  return app;
}
