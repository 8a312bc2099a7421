// Starts the API process's surfaces, each on its own port (the REST API, the gateway, S3), with the
// connections they share, and stops them gracefully.
import type { Config } from '../infra/config.js';
import { createEdgeAnswers } from '../edge/purge.js';
import { createClusterClient } from '../infra/ipfs/cluster.js';
import { openDatabase } from '../infra/db/index.js';
import { expandMigrations, migrateInBackground, processName } from '../infra/db/migrations/runner.js';
import { createKubo } from '../infra/ipfs/kubo.js';
import type { Logger } from '../infra/logger.js';
import { createTemporal } from '../infra/temporal/client.js';
import { createJobs } from '../infra/temporal/jobs.js';
import { startGateway } from './gateway/server.js';
import { startS3 } from './s3/server.js';
import { listen } from './listen.js';
import { createApp, type AppDeps } from './rest/app.js';
import { createContentPeers } from '../core/peers.js';

export interface ApiServer {
  url: string;
  /** The gateway's own address (its accounts are subdomains of GATEWAY_PUBLIC_URL's host). */
  gatewayUrl: string;
  /** The S3 interface's own address (path-style; buckets are also subdomains of S3_DOMAIN). */
  s3Url: string;
  deps: AppDeps;
  /** Stops gracefully. `drainMs` (SHUTDOWN_DRAIN_MS for a process told to stop): first, for that
   * long, /readyz answers 503 and every answer closes its connection, while requests are still
   * served, so a load balancer takes the process out before it stops listening. Closing an idle
   * kept-alive connection at once races a request being sent on it: the edge had sent an upload
   * on one, got a reset, and answered 502 (found by the upgrade drill, 1 request in 2,000). */
  close(options?: { drainMs?: number }): Promise<void>;
}

export async function startApiServer(config: Config, logger: Logger): Promise<ApiServer> {
  const db = await openDatabase(config.mongodbUri);
  // Before any surface serves, the quick steps that let this release read what the one before
  // wrote; the data migrations themselves run in the background (infra/db/migrations/).
  await expandMigrations(db);
  const temporal = createTemporal(config.temporal);
  // A copy: the addresses clients use are known only once the servers listen (port 0 in tests).
  const served: Config = { ...config, api: { ...config.api }, gateway: { ...config.gateway }, s3: { ...config.s3 } };
  const cluster = createClusterClient(config.cluster.apiUrl);
  const lifecycle = { draining: false };
  const deps: AppDeps = {
    lifecycle,
    config: served,
    logger,
    db,
    temporal,
    jobs: createJobs(temporal.client, config.temporal.taskQueue),
    kubo: createKubo(config.kubo.apiUrl),
    cluster,
    edgeAnswers: createEdgeAnswers(config.edge, logger),
    peers: createContentPeers(cluster),
  };
  // Beating before it serves: the sweep tells a request cut by this process's death by it.
  const stopBeating = await db.processes.startBeating('api');
  const listening = await listen(createApp(deps), config.api.host, config.api.port, config.shutdownTimeoutMs);
  served.api.publicUrl ??= listening.url;
  const gateway = await startGateway(deps);
  const s3 = await startS3(deps);
  // One API process at a time migrates; the others try again in case it dies.
  const migrating = migrateInBackground(db, { logger, by: processName('api'), pace: config.migrationPace });

  let closing: Promise<void> | undefined;
  const close = (options: { drainMs?: number } = {}) =>
    (closing ??= (async () => {
      if (options.drainMs) {
        lifecycle.draining = true;
        for (const surface of [listening, gateway, s3]) surface.drain();
        await new Promise((r) => setTimeout(r, options.drainMs));
      }
      const ended = await Promise.all([listening.close(), gateway.close(), s3.close()]);
      // Every request ended by itself: none of them can have left a reservation behind.
      await stopBeating({ clean: ended.every(Boolean) });
      await migrating.stop();
      await db.close();
      await temporal.close();
    })());

  return { url: listening.url, gatewayUrl: gateway.url, s3Url: s3.url, deps, close };
}
