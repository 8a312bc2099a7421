// A webhook receiver on loopback for the tests: it keeps every request, with when it came, and
// answers with the status `answer` gives for the request's path and its count there.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

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
