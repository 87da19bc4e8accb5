import * as net from 'net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. The Temporal CLI rejects port 0,
 * so callers pick a port up front; another process could still grab it before the server binds.
 */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() => (port === undefined ? reject(new Error('Could not read the listening port')) : resolve(port)));
    });
  });
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
