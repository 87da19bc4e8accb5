import path from 'node:path';
import type { TemporalConfig } from '../../temporal/config';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { ProdTemporal, temporalConfigFlags } from '../temporal-prod/prod-temporal';
import { SERVICES } from '../temporal-prod/server-config';

/**
 * The Temporal server of a soak or benchmark run (not jest's, which global-setup starts): the dev server, or with
 * `--temporal prod` the production-style one (docs/temporal-cluster.md).
 */
export interface RunTemporal {
  config: TemporalConfig;
  /** The driver's Temporal flags for it. */
  flags: string[];
  prod?: ProdTemporal;
  /** Stops it (the signal), waits downMs and starts it again on the same database and port. */
  restart(signal: 'SIGTERM' | 'SIGKILL', downMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startRunTemporal(
  kind: 'dev' | 'prod',
  workDir: string,
  progress: (message: string) => void,
): Promise<RunTemporal> {
  const dataDir = path.join(workDir, 'temporal');
  if (kind === 'prod') {
    progress(`starting the production-style Temporal (PostgreSQL, four services, mTLS; files in ${dataDir})`);
    const prod = await ProdTemporal.start({ dataDir, progress });
    return {
      config: prod.connectionConfig(),
      flags: prod.driverFlags(),
      prod,
      async restart(signal, downMs) {
        await prod.stopServices(signal);
        await new Promise((resolve) => setTimeout(resolve, downMs));
        prod.startServices(['frontend']);
        prod.startServices(SERVICES);
        await prod.waitReady(120_000);
      },
      stop: () => prod.stop(),
    };
  }
  const port = await findFreePort();
  progress(`starting the Temporal dev server on 127.0.0.1:${port} (database in ${dataDir})`);
  const start = () => startDevServer({ dataDir, port, headless: true });
  let server: DevServer = await start();
  const config = { address: server.address, namespace: server.namespace };
  return {
    config,
    flags: temporalConfigFlags(config),
    async restart(signal, downMs) {
      if (signal === 'SIGKILL') process.kill(server.pid, 'SIGKILL');
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      server = await start();
    },
    stop: () => server.stop(),
  };
}
