import net from 'node:net';

/**
 * A byte forwarder between a unix socket and a TCP address, the only bridge between the test process and the
 * node's network namespace (the machine's own addresses are off limits: docs/kubernetes.md). Started inside the
 * namespace as `node forwarder.js LISTEN CONNECT` (the API server to the test), or in the test process itself
 * (the test's Temporal to the Pods). An address is `unix:/path` or `tcp:host:port`.
 */
export function forward(listen: string, connect: string): Promise<net.Server> {
  const server = net.createServer((inbound) => {
    const outbound = net.connect(connectOptions(connect));
    inbound.pipe(outbound).pipe(inbound);
    const close = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', close);
    outbound.on('error', close);
    inbound.on('close', close);
    outbound.on('close', close);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(connectOptions(listen), () => resolve(server));
  });
}

function connectOptions(address: string): net.NetConnectOpts & net.ListenOptions {
  if (address.startsWith('unix:')) return { path: address.slice('unix:'.length) };
  const tcp = /^tcp:(.+):(\d+)$/.exec(address);
  if (!tcp?.[1] || !tcp[2]) throw new Error(`address "${address}" is not unix:/path or tcp:host:port`);
  return { host: tcp[1], port: Number(tcp[2]) };
}

if (require.main === module) {
  const [listen, connect] = process.argv.slice(2);
  if (!listen || !connect) {
    console.error('usage: forwarder LISTEN CONNECT (unix:/path or tcp:host:port)');
    process.exit(2);
  }
  forward(listen, connect).then(
    () => console.error(`forwarding ${listen} -> ${connect}`),
    (error: unknown) => {
      console.error(`cannot listen on ${listen}: ${String(error)}`);
      process.exit(1);
    },
  );
}
