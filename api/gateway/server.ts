// Starts the gateway on GATEWAY_PORT over the API process's components, with what only the
// gateway keeps: its connection pool to Kubo's gateway, the bandwidth meter and the memory of
// holds; with EDGE_REPORT_PORT, the listener for the edge's reports of bytes it served.
import type { Config } from '../../infra/config.js';
import { createKuboGateway } from '../../infra/ipfs/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import { createBandwidthMeter } from '../../core/bandwidth.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createHeldMemory } from '../../core/held.js';
import { listen, type Listening } from '../listen.js';
import { createGatewayHandler } from './app.js';
import { startEdgeReports } from './edge.js';

export async function startGateway(deps: Pick<UseCaseDeps, 'db' | 'config'> & { logger: Logger; config: Config }): Promise<Listening> {
  const { config } = deps;
  const kuboGateway = createKuboGateway(config.kubo.gatewayUrl, config.kubo.peerGatewayUrls);
  const bandwidth = createBandwidthMeter(deps.db);
  const app = createGatewayHandler({ ...deps, kuboGateway, bandwidth, held: createHeldMemory(deps.db) });
  const listening = await listen(app, config.api.host, config.gateway.port, config.shutdownTimeoutMs);
  const reports =
    config.edge.reportPort === null ? null : await startEdgeReports(config.api.host, config.edge.reportPort, bandwidth, deps.logger);
  // Mutates the process's own copy of the configuration (api/server.ts): the address is known now.
  config.gateway.publicUrl ??= `http://${config.gateway.domain}:${listening.port}`;
  return {
    ...listening,
    async close() {
      const ended = await listening.close();
      await reports?.close();
      kuboGateway.close();
      await bandwidth.flush();
      return ended;
    },
  };
}
