import type { TestCertificates } from './certificates';
import { API_KEY_SERVER_NAME, FRONTEND_SERVER_NAME } from './certificates';

export const SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface ServicePorts {
  grpc: number;
  membership: number;
}

export interface ServerConfigInput {
  ports: Record<ServiceName, ServicePorts> & { frontendHttp: number };
  postgres: { port: number; user: string; password: string };
  numHistoryShards: number;
  dynamicConfigFile: string;
  /** mTLS on the frontend (required client certificates); undefined serves plain gRPC. */
  tls?: TestCertificates;
  /** A Prometheus listener on 127.0.0.1 (each service needs its own port, so its own config file). */
  metricsPort?: number;
}

/**
 * temporal-server's configuration, modelled on the module's config/development-postgres12.yaml: PostgreSQL for
 * persistence and visibility, every service and the membership ring on 127.0.0.1, no pprof listener and no metrics
 * listener unless a port is given (four processes would fight over one: the benchmark writes a config per service).
 * Returned as JSON, which is YAML too.
 */
export function renderServerConfig(input: ServerConfigInput): string {
  const datastore = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `127.0.0.1:${input.postgres.port}`,
      connectProtocol: 'tcp',
      user: input.postgres.user,
      password: input.postgres.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (name: ServiceName) => ({
    rpc: {
      grpcPort: input.ports[name].grpc,
      membershipPort: input.ports[name].membership,
      bindOnLocalHost: true,
      ...(name === 'frontend' ? { httpPort: input.ports.frontendHttp } : {}),
    },
  });
  const config = {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: input.numHistoryShards,
      datastores: {
        'postgres-default': datastore('temporal', 20),
        'postgres-visibility': datastore('temporal_visibility', 10),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(input.tls ? { tls: tlsSection(input.tls) } : {}),
      ...(input.metricsPort
        ? {
            metrics: {
              prometheus: {
                framework: 'tally',
                timerType: 'histogram',
                listenAddress: `127.0.0.1:${input.metricsPort}`,
              },
            },
          }
        : {}),
    },
    services: Object.fromEntries(SERVICES.map((name) => [name, service(name)])),
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${input.ports.frontend.grpc}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: input.dynamicConfigFile, pollInterval: '10s' },
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/**
 * The frontend requires client certificates from our CA; API_KEY_SERVER_NAME is served without them (the way
 * Temporal Cloud's API-key endpoint is), so `--temporal-tls` alone can be exercised. Temporal's own worker service
 * connects to the frontend with the client certificate. Traffic between history, matching and worker stays plain:
 * it never leaves 127.0.0.1 here (a real cluster sets global.tls.internode as well).
 */
function tlsSection(certs: TestCertificates) {
  return {
    frontend: {
      server: {
        certFile: certs.server.cert,
        keyFile: certs.server.key,
        requireClientAuth: true,
        clientCaFiles: [certs.ca],
      },
      hostOverrides: {
        [API_KEY_SERVER_NAME]: { certFile: certs.apiKeyServer.cert, keyFile: certs.apiKeyServer.key },
      },
    },
    systemWorker: {
      certFile: certs.client.cert,
      keyFile: certs.client.key,
      client: { serverName: FRONTEND_SERVER_NAME, rootCaFiles: [certs.ca] },
    },
  };
}

/**
 * Dynamic config for tests: retention may go down to seconds (the retention test uses a namespace with a short
 * one), and a closed workflow is deleted right when its retention ends instead of up to 30 minutes later.
 * Never lower these on a real cluster. `more`: further settings (the scale benchmark's poll limit and partitions).
 */
export function renderDynamicConfig(more: Record<string, unknown> = {}): string {
  const setting = (value: unknown) => [{ value, constraints: {} }];
  return `${JSON.stringify(
    {
      'system.namespaceMinRetentionLocal': setting('1s'),
      'history.retentionTimerJitterDuration': setting('1s'),
      ...Object.fromEntries(Object.entries(more).map(([key, value]) => [key, setting(value)])),
    },
    null,
    2,
  )}\n`;
}
