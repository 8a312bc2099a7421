// One raw HTTP/1.1 exchange on a fresh connection: the bytes as given (a malformed request a
// client library would refuse to send), and the answer as it came: whole once its Content-Length
// has arrived, else when the server closes.
import net from 'node:net';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds from sending to the end of the answer. */
  ms: number;
}

export function rawExchange(port: number, request: string | Buffer, timeoutMs = 15_000): Promise<RawAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no whole answer from :${port} within ${timeoutMs} ms`)));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      // A whole answer with a length: done, whether or not the server keeps the connection.
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1];
      if (end >= 0 && length !== undefined && Buffer.byteLength(text, 'latin1') >= end + 4 + Number(length)) socket.destroy();
    });
    // The server may close while the request is still being written (headers over its limit).
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? undefined : reject(err)));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
      if (!status) return reject(new Error(`not an HTTP answer from :${port}: ${JSON.stringify(text.slice(0, 200))}`));
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as [string, string]),
      );
      resolve({ status, headers, body: Buffer.from(rest.join('\r\n\r\n'), 'latin1').toString('utf8'), ms: performance.now() - started });
    });
  });
}
