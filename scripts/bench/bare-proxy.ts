// The upload bench's floor: a bare node:http proxy, in a process of its own, that pipes a
// client's request body to Kubo's add unread and pipes the answer back. Whatever the API
// spends on an upload beyond this, it spends on its own work; what this costs (the kernel's
// copies in and out of a Node process, the HTTP parser) any proxy in Node pays.
// Started by upload.ts with Kubo's API URL; it tells its parent its port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const kubo = new URL(process.argv[2]!);
const server = http.createServer((req, res) => {
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'content-length', 'transfer-encoding']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  const url = new URL(req.url ?? '/', kubo);
  const out = http.request(url, { method: req.method, headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  out.on('error', () => res.destroy());
  req.pipe(out);
});
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
