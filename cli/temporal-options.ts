import type { Command } from 'commander';
import type { TemporalConfig } from '../common/temporal-config';

/** The Temporal connection flags every long-running command takes. */
export function addTemporalOptions(command: Command): Command {
  return command
    .option('--temporal-address <host:port>', 'Temporal frontend', process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233')
    .option('--temporal-namespace <ns>', 'Temporal namespace', process.env.TEMPORAL_NAMESPACE ?? 'default')
    .option('--temporal-tls', 'use TLS without client certificates (e.g. Temporal Cloud with an API key)')
    .option('--temporal-tls-cert <file>', 'client certificate for mTLS')
    .option('--temporal-tls-key <file>', 'client key for mTLS')
    .option('--temporal-tls-ca <file>', 'CA bundle to verify the server with')
    .option('--temporal-tls-server-name <name>', 'server name to verify instead of the address host')
    .option('--temporal-api-key-file <file>', 'file holding a Temporal Cloud API key');
}

/** The metrics flags of the long-running processes (controller, node agent). */
export function addMetricsOptions(command: Command): Command {
  return command
    .option('--metrics-address <host:port>', 'serve Prometheus metrics at http://host:port/metrics (off by default)')
    .option('--sdk-metrics-address <host:port>', "serve the Temporal SDK's own Prometheus metrics (off by default)");
}

export interface TemporalFlags {
  temporalAddress: string;
  temporalNamespace: string;
  temporalTls?: boolean;
  temporalTlsCert?: string;
  temporalTlsKey?: string;
  temporalTlsCa?: string;
  temporalTlsServerName?: string;
  temporalApiKeyFile?: string;
  metricsAddress?: string;
  sdkMetricsAddress?: string;
}

export function temporalConfig(flags: TemporalFlags): TemporalConfig {
  return {
    address: flags.temporalAddress,
    namespace: flags.temporalNamespace,
    tls: flags.temporalTls,
    tlsCert: flags.temporalTlsCert,
    tlsKey: flags.temporalTlsKey,
    tlsCa: flags.temporalTlsCa,
    tlsServerName: flags.temporalTlsServerName,
    apiKeyFile: flags.temporalApiKeyFile,
  };
}
