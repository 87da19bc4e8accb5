import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../common/logger';
import { parseListenAddress } from '../common/listen-address';

/** One Prometheus registry per process, with the CSI call metrics every process has. */
export interface ProcessMetrics {
  registry: Registry;
  csiCalls: Counter<'method' | 'code'>;
  csiCallSeconds: Histogram<'method' | 'code'>;
}

/**
 * How often the event loop lag histogram (`durable_csi_process_nodejs_eventloop_lag_*`) samples, in ms. prom-client's
 * default, 10 ms, is a timer a hundred times a second on the main thread, scraped or not: 5 ms of CPU a second in
 * a process with nothing else to do, about half of what an idle controller or node agent spent
 * (docs/performance.md, round 4). A stall of the loop still shows; the histogram's resolution is 100 ms.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 100;

export function createProcessMetrics(component: string): ProcessMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  collectDefaultMetrics({
    register: registry,
    prefix: 'durable_csi_process_',
    eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS,
  });
  const csiCalls = new Counter({
    name: 'durable_csi_csi_calls_total',
    help: 'CSI calls answered, by method and gRPC code',
    labelNames: ['method', 'code'],
    registers: [registry],
  });
  const csiCallSeconds = new Histogram({
    name: 'durable_csi_csi_call_duration_seconds',
    // By code too: an ABORTED answer takes the whole --call-wait by design, and would hide an OK call's latency.
    help: 'CSI call latency, by method and gRPC code',
    labelNames: ['method', 'code'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  return { registry, csiCalls, csiCallSeconds };
}

/**
 * `durable_csi_temporal_client_certificate_expiry_timestamp_seconds{file}`: when the client certificate the agent
 * presents to Temporal ends (`presented`: the live connection's, temporal/connection.ts), or, before a connection,
 * the one in the file; no sample without a client certificate. The DurableCsiTemporalCertificateExpiring alert
 * reads it: a renewal that never reached the agent (or that it refused, as its log says) shows here before it hurts.
 */
export function registerClientCertificateExpiry(
  registry: Registry,
  certFile: string | undefined,
  presented: () => Date | undefined,
): void {
  new Gauge({
    name: 'durable_csi_temporal_client_certificate_expiry_timestamp_seconds',
    help: "End of validity of the Temporal client certificate presented (seconds since the epoch), by the file's path",
    labelNames: ['file'],
    registers: [registry],
    collect() {
      this.reset();
      if (!certFile) return;
      let notAfter = presented();
      if (!notAfter)
        try {
          notAfter = new Date(new crypto.X509Certificate(fs.readFileSync(certFile)).validTo);
        } catch {
          return; // unreadable for now (mid-rotation): the connection's log says why
        }
      this.set({ file: certFile }, Math.floor(notAfter.getTime() / 1000));
    },
  });
}

/** Readiness for GET /readyz: undefined when ready, else why not (the 503's body). */
export type ReadinessCheck = () => Promise<string | undefined>;

/**
 * Serves GET /metrics on host:port (an empty address turns it off), and GET /readyz and GET /livez when given
 * their checks.
 */
export async function serveMetrics(
  address: string,
  registry: Registry,
  logger: Logger,
  readiness?: ReadinessCheck,
  liveness?: ReadinessCheck,
): Promise<() => Promise<void>> {
  const { host, port } = parseListenAddress(address, 'metrics');
  const server = http.createServer((request, response) => {
    const check = request.url === '/readyz' ? readiness : request.url === '/livez' ? liveness : undefined;
    if (check) {
      check().then(
        (notReady) => response.writeHead(notReady ? 503 : 200).end(notReady ?? 'ok'),
        (error: unknown) => response.writeHead(503).end(String(error)),
      );
      return;
    }
    if (request.url !== '/metrics') {
      response.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      (error: unknown) => {
        logger.warn({ err: error }, 'metrics collection failed');
        response.writeHead(500).end(String(error));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  logger.info({ address }, 'metrics listening');
  return () => new Promise<void>((resolve) => server.close(() => resolve()));
}
