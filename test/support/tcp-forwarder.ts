import net from 'node:net';

/**
 * A TCP forwarder on a fixed port: before it starts nothing listens there (Temporal "unreachable": connections
 * are refused), once started every connection reaches the upstream server. Lets a test bring Temporal "back"
 * for one process without stopping the server every other suite shares.
 */
export class TcpForwarder {
  private readonly sockets = new Set<net.Socket>();
  private readonly server: net.Server;

  private constructor(upstream: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      const server = net.connect(upstream.port, upstream.host);
      for (const socket of [client, server]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          this.sockets.delete(socket);
          client.destroy();
          server.destroy();
        });
      }
      client.pipe(server).pipe(client);
    });
  }

  static async start(port: number, upstreamAddress: string): Promise<TcpForwarder> {
    const [host, upstreamPort] = upstreamAddress.split(':');
    const forwarder = new TcpForwarder({ host: host ?? '127.0.0.1', port: Number(upstreamPort) });
    await new Promise<void>((resolve, reject) => {
      forwarder.server.once('error', reject);
      forwarder.server.listen(port, '127.0.0.1', resolve);
    });
    return forwarder;
  }

  /** Drops every open connection (a frontend restart as its clients see it); new ones are forwarded as before. */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
