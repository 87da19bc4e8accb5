import * as fs from 'fs';
import * as net from 'net';

/** Below this, ports are often taken by well-known services. */
const LOWEST_PICKED_PORT = 10000;
const ATTEMPTS = 200;

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. The Temporal CLI rejects port 0,
 * so callers pick a port up front; another process could still grab it before the server binds.
 * The port is picked below the kernel's ephemeral range: listen(0) and every outgoing connection
 * (the Temporal dev server's own services, gRPC clients of tests running beside) take ports from that
 * range, and one of them taking a port between our check and the bind failed runs with EADDRINUSE.
 */
export async function findFreePort(): Promise<number> {
  return findFreePortRange(1);
}

/** The first of `count` consecutive ports on 127.0.0.1, all free a moment ago (see findFreePort). */
export async function findFreePortRange(count: number): Promise<number> {
  const [low, high] = pickableRange(count);
  if (low > high) throw new Error(`no room for ${count} consecutive ports outside the ephemeral range`);
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const first = low + Math.floor(Math.random() * (high - low + 1));
    if (await allFree(first, count)) return first;
  }
  throw new Error(`no ${count} consecutive free ports on 127.0.0.1 between ${low} and ${high + count - 1}`);
}

/** Whether nothing listens on 127.0.0.1:port (other listen errors, e.g. EACCES, are rethrown). */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(false) : reject(err)));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function allFree(first: number, count: number): Promise<boolean> {
  for (let port = first; port < first + count; port++) if (!(await isPortFree(port))) return false;
  return true;
}

/** The first ports a range of `count` may start at: below the ephemeral range, or above it if that is too low. */
function pickableRange(count: number): [number, number] {
  const [ephemeralLow, ephemeralHigh] = ephemeralPorts();
  if (ephemeralLow - count > LOWEST_PICKED_PORT) return [LOWEST_PICKED_PORT, ephemeralLow - count];
  return [ephemeralHigh + 1, 65535 - count + 1];
}

function ephemeralPorts(): [number, number] {
  try {
    const [low, high] = fs
      .readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low && high && low <= high) return [low, high];
  } catch {
    // not Linux: the IANA dynamic range
  }
  return [49152, 65535];
}
