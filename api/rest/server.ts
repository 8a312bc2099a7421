// Starts the REST API on its port with the connections it owns, and stops it gracefully.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Config } from '../../infra/config.js';
import { createClusterClient } from '../../infra/cluster.js';
import { openDatabase } from '../../infra/db/index.js';
import { createKubo } from '../../infra/kubo.js';
import type { Logger } from '../../infra/logger.js';
import { createTemporal } from '../../infra/temporal/client.js';
import { createJobs } from '../../infra/temporal/jobs.js';
import { createApp, type AppDeps } from './app.js';

export interface ApiServer {
  url: string;
  deps: AppDeps;
  close(): Promise<void>;
}

/** Node answers malformed requests itself, with an empty text body; answer them in JSON too. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const [status, text, reason] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'HEADERS_TOO_LARGE']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'REQUEST_TIMEOUT']
        : [400, 'Bad Request', 'MALFORMED_REQUEST'];
  const body = JSON.stringify({ error: { reason, details: `the HTTP request could not be parsed (${err.code ?? 'unknown'})` } });
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export async function startApiServer(config: Config, logger: Logger): Promise<ApiServer> {
  const db = await openDatabase(config.mongodbUri);
  const temporal = createTemporal(config.temporal);
  const deps: AppDeps = {
    config,
    logger,
    db,
    temporal,
    jobs: createJobs(temporal.client, config.temporal.taskQueue),
    kubo: createKubo(config.kubo.apiUrl),
    cluster: createClusterClient(config.cluster.apiUrl),
  };
  const server = http.createServer(createApp(deps));
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.api.port, config.api.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.api.host.includes(':') ? `[${config.api.host}]` : config.api.host}:${port}`;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // Stop taking connections, let requests in flight finish, then drop idle keep-alives;
      // whatever is still open after the timeout is cut.
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), config.shutdownTimeoutMs);
      await done;
      clearTimeout(timer);
      await db.close();
      await temporal.close();
    })());

  return { url, deps, close };
}
