// A relay in front of the test stack's Kubo gateway that records every request reaching it:
// where a test shows that a read was or was not asked of Kubo (the edge's tests, S3's answers
// kept in memory), without touching Kubo's blockstore; also in front of Cluster (pins' peers).
import http from 'node:http';

export interface RecordingKubo {
  url: string;
  seen: { url: string; headers: http.IncomingHttpHeaders }[];
  /** When set, every request is answered with this status instead of Kubo's answer. */
  failWith: number | null;
  close(): Promise<void>;
}

/** A relay in front of Kubo's gateway that records every request reaching it. */
export const recordingKubo = (): Promise<RecordingKubo> => recordingRelay(process.env.STUPA_TEST_KUBO_GATEWAY_URL!);

/** The same in front of any HTTP server of the stack (Cluster's REST API, for one). */
export async function recordingRelay(target: string): Promise<RecordingKubo> {
  const kubo = new URL(target);
  const server = http.createServer((req, res) => {
    recorder.seen.push({ url: req.url ?? '', headers: req.headers });
    if (recorder.failWith !== null) {
      res.writeHead(recorder.failWith, { 'content-type': 'text/plain' }).end('failed on purpose');
      return;
    }
    const upstream = http.request(
      { host: kubo.hostname, port: kubo.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const recorder: RecordingKubo = {
    url: `http://127.0.0.1:${port}`,
    seen: [],
    failWith: null,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return recorder;
}
