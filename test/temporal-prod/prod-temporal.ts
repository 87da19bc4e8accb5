import fs from 'node:fs';
import path from 'node:path';
import type { TemporalConfig } from '../../temporal/config';
import { findFreePort, isPortFree } from '../../temporal-dev/free-port';
import { locateTemporalCli } from '../../temporal-dev/locate-cli';
import { FRONTEND_SERVER_NAME, makeTestCertificates, type TestCertificates } from './certificates';
import { installedServer } from './installed-server';
import { temporalCliConnectionFlags } from '../../temporal/register-commands';
import { createNamespace, registerSearchAttributes } from './namespace-setup';
import { startPostgres, type Postgres } from './postgres';
import { waitForCluster } from './readiness';
import { setUpSchemas } from './schema';
import {
  renderDynamicConfig,
  renderServerConfig,
  SERVICES,
  type ServiceName,
  type ServicePorts,
} from './server-config';
import { ServiceProcess } from './service-process';

export interface NamespaceSpec {
  name: string;
  /** As `temporal operator namespace create --retention` takes it: 72h, 10s. */
  retention: string;
}

export interface ProdTemporalOptions {
  /** Config, certificates and service logs; PostgreSQL's own directory is elsewhere (see postgres.ts). */
  dataDir: string;
  /** The first one is the default namespace of driverFlags(); default: `default` with 72 h retention. */
  namespaces?: NamespaceSpec[];
  /** mTLS on the frontend (default true). */
  tls?: boolean;
  numHistoryShards?: number;
  /** A Prometheus endpoint per service (metricsUrls), for the scale benchmark. */
  metrics?: boolean;
  /** More dynamic config (key -> value), e.g. frontend.namespaceCount. */
  dynamicConfig?: Record<string, unknown>;
  progress?(message: string): void;
}

/**
 * A production-style Temporal on this machine (docs/temporal-cluster.md): PostgreSQL, schemas set up with
 * temporal-sql-tool, and frontend, history, matching and worker as four OS processes on 127.0.0.1, the frontend
 * behind mTLS. Nothing exists at first: namespaces and search attributes are created the way an operator would.
 */
export class ProdTemporal {
  readonly services: Record<ServiceName, ServiceProcess>;

  private constructor(
    readonly address: string,
    readonly namespaces: NamespaceSpec[],
    readonly postgres: Postgres,
    readonly certificates: TestCertificates | undefined,
    readonly cli: string,
    configFiles: Record<ServiceName, string>,
    server: string,
    logDir: string,
    /** Each service's Prometheus endpoint, when started with `metrics`. */
    readonly metricsUrls: string[],
  ) {
    this.services = Object.fromEntries(
      SERVICES.map((name) => [
        name,
        new ServiceProcess(name, server, configFiles[name], path.join(logDir, `${name}.log`)),
      ]),
    ) as Record<ServiceName, ServiceProcess>;
  }

  static async start(options: ProdTemporalOptions): Promise<ProdTemporal> {
    const progress = options.progress ?? (() => undefined);
    const installed = installedServer();
    const cli = await locateTemporalCli();
    const namespaces = options.namespaces ?? [{ name: 'default', retention: '72h' }];
    for (const dir of ['config', 'logs']) fs.mkdirSync(path.join(options.dataDir, dir), { recursive: true });
    const certificates =
      options.tls === false ? undefined : await makeTestCertificates(path.join(options.dataDir, 'certs'));

    progress('starting PostgreSQL');
    const postgres = await startPostgres(await findFreePort());
    let cluster: ProdTemporal | undefined;
    try {
      progress('setting up the schemas with temporal-sql-tool');
      await setUpSchemas(installed, postgres);
      const numHistoryShards = options.numHistoryShards ?? 4;
      // The ports are checked free when picked, but a process beside (tests run side by side) can bind one before
      // the server does: then the service exits at once with EADDRINUSE, and new ports are picked.
      for (let attempt = 1; ; attempt++) {
        const { configFiles, address, metricsUrls } = await writeConfig(
          options.dataDir,
          postgres,
          numHistoryShards,
          certificates,
          options,
        );
        cluster = new ProdTemporal(
          address,
          namespaces,
          postgres,
          certificates,
          cli,
          configFiles,
          installed.server,
          path.join(options.dataDir, 'logs'),
          metricsUrls,
        );
        progress(`starting ${SERVICES.join(', ')} (temporal-server ${installed.version}), frontend ${address}`);
        try {
          // Frontend first: on an empty database every service would race to write the initial cluster metadata.
          cluster.startServices(['frontend']);
          await cluster.waitReady(90_000, 'system');
          cluster.startServices(['history', 'matching', 'worker']);
          break;
        } catch (error) {
          if (attempt >= PORT_ATTEMPTS || !String(error).includes('address already in use')) throw error;
          await cluster.stopServices('SIGKILL');
          progress(`a port was taken before the server bound it; new ports (attempt ${attempt + 1})`);
        }
      }
      for (const namespace of namespaces) {
        progress(`creating namespace ${namespace.name} (retention ${namespace.retention}) and its search attributes`);
        await createNamespace(cli, cluster.connectionConfig(), namespace);
        await registerSearchAttributes(cli, cluster.connectionConfig(), namespace.name);
      }
      await cluster.waitReady(90_000);
      return cluster;
    } catch (error) {
      await cluster?.stop();
      await postgres.destroy();
      throw error;
    }
  }

  get namespace(): string {
    return (this.namespaces[0] as NamespaceSpec).name;
  }

  /** How the driver reaches this server, as a TemporalConfig (temporal/config.ts). */
  connectionConfig(namespace = this.namespace): TemporalConfig {
    const certs = this.certificates;
    if (!certs) return { address: this.address, namespace };
    return {
      address: this.address,
      namespace,
      tlsCa: certs.ca,
      tlsCert: certs.client.cert,
      tlsKey: certs.client.key,
      tlsServerName: FRONTEND_SERVER_NAME,
    };
  }

  /** The same as durable-csi flags (controller, node, volumes/nodes commands). */
  driverFlags(namespace = this.namespace): string[] {
    return temporalConfigFlags(this.connectionConfig(namespace));
  }

  /** The same for the `temporal` CLI. */
  cliFlags(namespace = this.namespace): string[] {
    return temporalCliConnectionFlags(this.connectionConfig(namespace));
  }

  startServices(names: readonly ServiceName[] = SERVICES): void {
    for (const name of names) this.services[name].start();
  }

  async stopServices(signal: NodeJS.Signals = 'SIGTERM', names: readonly ServiceName[] = SERVICES): Promise<void> {
    await Promise.all(names.map((name) => this.services[name].stop(signal)));
  }

  /** Every unrequested service exit so far. */
  unexpectedExits(): string[] {
    return SERVICES.flatMap((name) => this.services[name].unexpectedExits);
  }

  /**
   * Until a workflow can be started, its task queue described (matching) and the workflow terminated, in every
   * namespace; `system` checks only that the frontend answers (before any namespace exists).
   */
  async waitReady(timeoutMs: number, scope: 'namespaces' | 'system' = 'namespaces'): Promise<void> {
    await waitForCluster(this, timeoutMs, scope);
  }

  async stop(): Promise<void> {
    await this.stopServices('SIGTERM');
    await this.postgres.destroy();
  }
}

/** The README's Temporal flags for a TemporalConfig. */
export function temporalConfigFlags(config: TemporalConfig): string[] {
  const flags = ['--temporal-address', config.address, '--temporal-namespace', config.namespace];
  if (config.tls) flags.push('--temporal-tls');
  if (config.tlsCa) flags.push('--temporal-tls-ca', config.tlsCa);
  if (config.tlsCert) flags.push('--temporal-tls-cert', config.tlsCert);
  if (config.tlsKey) flags.push('--temporal-tls-key', config.tlsKey);
  if (config.tlsServerName) flags.push('--temporal-tls-server-name', config.tlsServerName);
  if (config.apiKeyFile) flags.push('--temporal-api-key-file', config.apiKeyFile);
  if (config.insecure) flags.push('--temporal-insecure');
  return flags;
}

const MEMBERSHIP_PORTS = { from: 20_000, to: 32_000 };
const PORT_ATTEMPTS = 3;

/**
 * Picks the ports and writes the server's config and dynamic config; returns each service's config file (one file
 * for all, or one each when each has its own metrics port) and the frontend.
 */
async function writeConfig(
  dataDir: string,
  postgres: Postgres,
  numHistoryShards: number,
  tls: TestCertificates | undefined,
  options: Pick<ProdTemporalOptions, 'metrics' | 'dynamicConfig'>,
): Promise<{ configFiles: Record<ServiceName, string>; address: string; metricsUrls: string[] }> {
  const taken = new Set<number>();
  const free = await distinctFreePorts(SERVICES.length * (options.metrics ? 2 : 1) + 1, taken);
  const next = () => free.pop() as number;
  // Membership ports are stored in a smallint column: they must be below 32768, under Linux's ephemeral range.
  const membership = await distinctFreePorts(SERVICES.length, taken, MEMBERSHIP_PORTS);
  const servicePorts = Object.fromEntries(
    SERVICES.map((name, index) => [name, { grpc: next(), membership: membership[index] as number }]),
  );
  const ports = { ...(servicePorts as Record<ServiceName, ServicePorts>), frontendHttp: next() };
  const dynamicConfigFile = path.join(dataDir, 'config', 'dynamic-config.yaml');
  fs.writeFileSync(dynamicConfigFile, renderDynamicConfig(options.dynamicConfig));
  const write = (name: string, metricsPort?: number) => {
    const configFile = path.join(dataDir, 'config', `${name}.yaml`);
    const config = renderServerConfig({ ports, postgres, numHistoryShards, dynamicConfigFile, tls, metricsPort });
    fs.writeFileSync(configFile, config, { mode: 0o600 }); // it holds the database password
    return configFile;
  };
  const metricsPorts = options.metrics ? SERVICES.map(() => next()) : [];
  const shared = options.metrics ? undefined : write('temporal-server');
  const configFiles = Object.fromEntries(
    SERVICES.map((name, index) => [name, shared ?? write(`temporal-server-${name}`, metricsPorts[index])]),
  ) as Record<ServiceName, string>;
  return {
    configFiles,
    address: `127.0.0.1:${ports.frontend.grpc}`,
    metricsUrls: metricsPorts.map((port) => `http://127.0.0.1:${port}/metrics`),
  };
}

/**
 * `count` free ports not in `taken` (findFreePort's, below the ephemeral range, or picked at random in `range` and
 * checked free), added to `taken`: the two kinds of port share a range, and a port given twice fails the server.
 */
async function distinctFreePorts(
  count: number,
  taken: Set<number>,
  range?: { from: number; to: number },
): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const port = range ? range.from + Math.floor(Math.random() * (range.to - range.from)) : await findFreePort();
    if (taken.has(port) || (range && !(await isPortFree(port)))) continue;
    taken.add(port);
    ports.push(port);
  }
  return ports;
}
