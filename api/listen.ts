// How every surface (REST API, gateway, later S3) listens: an HTTP server on its own port that
// answers Node's own malformed-request errors in JSON, and closes gracefully.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { RequestListener } from 'node:http';
import { API_KEEPALIVE_MS } from '../edge/protocol.js';

export interface Listening {
  url: string;
  port: number;
  /** From now on every answer closes its connection (`Connection: close`): a client that
   * reuses connections learns from the answer itself that it must not reuse this one. */
  drain(): void;
  /** Stops taking connections, lets requests in flight finish (at most `timeoutMs`), then cuts the
   * rest; true when none had to be cut. */
  close(): Promise<boolean>;
}

/** How a surface words the answer to a request Node could not parse (JSON by default; S3's is XML). */
export type ClientErrorBody = (status: number, reason: string, details: string) => { contentType: string; body: string };

const jsonClientError: ClientErrorBody = (_status, reason, details) => ({
  contentType: 'application/json; charset=utf-8',
  body: JSON.stringify({ error: { reason, details } }),
});

/** Node answers malformed requests itself, with an empty text body; answer them in the surface's format. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket, format: ClientErrorBody): void {
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
  answerOnSocket(socket, status, text, format(status, reason, `the HTTP request could not be parsed (${err.code ?? 'unknown'})`));
}

/** An answer written straight to the connection, which then closes. */
function answerOnSocket(socket: Socket, status: number, text: string, { contentType, body }: { contentType: string; body: string }): void {
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export async function listen(
  app: RequestListener,
  host: string,
  port: number,
  timeoutMs: number,
  format: ClientErrorBody = jsonClientError,
  /** The app answers `Expect: 100-continue` itself (res.writeContinue once it accepts the request). */
  continueByApp = false,
): Promise<Listening> {
  // Node answers an HTTP/1.1 request without Host itself (400, no body, no type) unless told not
  // to check: checked here instead, to answer it in the surface's format.
  let draining = false;
  const guarded: RequestListener = (req, res) => {
    if (draining) res.setHeader('Connection', 'close');
    if (req.headers.host !== undefined || req.httpVersion !== '1.1') return app(req, res);
    const { contentType, body } = format(400, 'MALFORMED_REQUEST', 'the HTTP request could not be parsed (missing required Host header)');
    res.writeHead(400, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    res.end(body);
  };
  const server = http.createServer({ requireHostHeader: false }, guarded);
  // Stated, not left to Node's default: the edge closes its idle connections first (protocol.ts).
  server.keepAliveTimeout = API_KEEPALIVE_MS;
  if (continueByApp) server.on('checkContinue', guarded);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => answerClientError(err, socket, format));
  // Node hands CONNECT to 'connect' listeners, not to the app, and with none closes the
  // connection unanswered; no surface tunnels.
  server.on('connect', (_req: http.IncomingMessage, socket: Socket) =>
    answerOnSocket(socket, 405, 'Method Not Allowed', format(405, 'METHOD_NOT_ALLOWED', 'CONNECT is not allowed here')),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  let closing: Promise<boolean> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    port: bound,
    drain: () => void (draining = true),
    close: () =>
      (closing ??= (async () => {
        const done = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        let cut = false;
        const timer = setTimeout(() => {
          cut = true;
          server.closeAllConnections();
        }, timeoutMs);
        await done;
        clearTimeout(timer);
        return !cut;
      })()),
  };
}
