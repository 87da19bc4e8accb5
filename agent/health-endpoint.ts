import http from 'node:http';
import type { Logger } from '../common/logger';
import { parseListenAddress } from '../common/listen-address';

/**
 * The Pods' probes, served by the driver itself (the livenessprobe sidecar is not on the Go module proxy, and a
 * sidecar that cannot reach the socket got the driver killed: docs/kubernetes.md, "Probes").
 * GET /healthz: liveness, the same answer as CSI Probe (this process can do its work; never Temporal's health).
 * GET /readyz: readiness when a check is given (the node agent: kubelet has registered the plugin).
 */
export interface HealthChecks {
  live: () => Promise<boolean>;
  /** undefined when ready, else why not (the 503's body). */
  ready?: () => Promise<string | undefined>;
}

export async function serveHealth(address: string, checks: HealthChecks, logger: Logger): Promise<() => Promise<void>> {
  const { host, port } = parseListenAddress(address, 'health');
  const server = http.createServer((request, response) => {
    const answer = (why: string | undefined) => response.writeHead(why ? 503 : 200).end(why ?? 'ok');
    const failed = (error: unknown) => response.writeHead(503).end(String(error));
    if (request.url === '/healthz') checks.live().then((live) => answer(live ? undefined : 'not live'), failed);
    else if (request.url === '/readyz' && checks.ready) checks.ready().then(answer, failed);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  logger.info({ address }, 'health endpoint listening');
  return () => new Promise<void>((resolve) => server.close(() => resolve()));
}
