// Ports for the local stack. Free ports come from the kernel (listen on port 0), so stacks
// side by side never pick the same one; fixed ports are checked up front, so a clash names
// the port and its owner instead of surfacing as a piece that never becomes healthy.
import net from 'node:net';

/** A port nothing listens on right now on 127.0.0.1 (the kernel picks it; it is released at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** `n` distinct free ports (the kernel may hand the same one out twice in a row). */
export async function freePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/** Whether something accepts TCP connections on 127.0.0.1:port within `timeoutMs`. */
export function canConnect(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Throws naming every port of `ports` (name → port) that is already taken on 127.0.0.1. */
export async function assertPortsFree(ports: Record<string, number>): Promise<void> {
  const taken: string[] = [];
  for (const [name, port] of Object.entries(ports)) {
    if (!(await isFree(port))) taken.push(`${port} (${name})`);
  }
  if (taken.length > 0) {
    throw new Error(`port(s) already in use on 127.0.0.1: ${taken.join(', ')}; is another stack running? Choose another port base.`);
  }
}
