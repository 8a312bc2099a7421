// A request to a port on 127.0.0.1 with a Host of the test's choosing: accounts' gateways and
// buckets are subdomains (`<slug>.localhost`), which this machine's resolver may not resolve.
import http from 'node:http';

export interface HostReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export function hostRequest(
  port: number | string,
  host: string,
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<HostReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: { Host: host, ...options.headers } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
