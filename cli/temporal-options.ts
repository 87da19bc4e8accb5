import type { Command } from 'commander';
import type { TemporalConfig } from '../temporal/config';
import { checkTemporalTransport } from '../temporal/transport';

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
    .option('--temporal-api-key-file <file>', 'file holding a Temporal Cloud API key (read again when it changes)')
    .option(
      '--temporal-insecure',
      'accept plaintext (no TLS, no API key) to a non-loopback Temporal address; for dev clusters only (env TEMPORAL_INSECURE=true)',
    );
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
  temporalInsecure?: boolean;
  metricsAddress?: string;
  sdkMetricsAddress?: string;
}

/** The connection the flags describe, refused (with the flag to change) when it would be weaker than it looks. */
export function temporalConfig(flags: TemporalFlags): TemporalConfig {
  const config: TemporalConfig = {
    address: flags.temporalAddress,
    namespace: flags.temporalNamespace,
    tls: flags.temporalTls,
    tlsCert: flags.temporalTlsCert,
    tlsKey: flags.temporalTlsKey,
    tlsCa: flags.temporalTlsCa,
    tlsServerName: flags.temporalTlsServerName,
    apiKeyFile: flags.temporalApiKeyFile,
    ...(flags.temporalInsecure === true || insecureFromEnv() ? { insecure: true } : {}),
  };
  checkTemporalTransport(config);
  return config;
}

/** TEMPORAL_INSECURE (what deploy/components/temporal-insecure sets): true or false, nothing vaguer. */
function insecureFromEnv(): boolean {
  const value = (process.env.TEMPORAL_INSECURE ?? '').trim().toLowerCase();
  if (value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw new Error(`TEMPORAL_INSECURE is "${process.env.TEMPORAL_INSECURE}"; it must be true or false`);
}
