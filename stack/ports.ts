// Ports for the local stack. Free ports are probed below the kernel's ephemeral range (below);
// fixed ports are checked up front, so a clash names the port and its owner instead of
// surfacing as a piece that never becomes healthy.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';

// Free ports are picked below the kernel's ephemeral range: what the kernel hands out for
// `listen(0)` (Temporal's internal services, test servers) and as the local port of every
// outgoing connection comes from that range, so a port picked inside it could be taken by
// one of those between the pick and the server's own bind (seen in CI: Cluster's REST port,
// "bind: address already in use"). Below the range only a server told its port takes one, and
// a process never hands out the same port twice.
const PICK_LOW = 10_000;
const PICK_HIGH = 16_999; // npm start's default ports are 17001-17401
const handedOut = new Set<number>();

/** The first port of the kernel's ephemeral range (Linux: ip_local_port_range). */
function ephemeralLow(): number {
  try {
    const low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > PICK_LOW ? low : 32_768;
  } catch {
    return 32_768; // the IANA range's start, where other systems begin theirs
  }
}

/** A port nothing listens on right now on 127.0.0.1, below the ephemeral range, not handed out
 * before by this process (it is released at once: the caller's server binds it). */
export async function freePort(): Promise<number> {
  const high = Math.min(PICK_HIGH, ephemeralLow() - 1);
  for (let attempt = 0; attempt < 1000; attempt++) {
    const port = crypto.randomInt(PICK_LOW, high + 1);
    if (handedOut.has(port) || !(await isFree(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${PICK_LOW} and ${high}`);
}

/** `n` distinct free ports. */
export async function freePorts(n: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < n) ports.push(await freePort());
  return ports;
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
