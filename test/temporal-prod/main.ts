/**
 * Runs the production-style Temporal on its own until Ctrl-C, for benchmarks and trying the operator commands:
 * `node dist/test/temporal-prod/main.js [--data-dir DIR] [--no-tls]`. Prints the durable-csi and temporal CLI flags.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProdTemporal } from './prod-temporal';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--data-dir');
  const dataDir = at >= 0 ? (args[at + 1] ?? '') : fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-prod-temporal-'));
  const progress = (message: string) => process.stderr.write(`[temporal-prod] ${message}\n`);
  const cluster = await ProdTemporal.start({ dataDir, tls: !args.includes('--no-tls'), progress });
  process.stdout.write(
    `frontend ${cluster.address}; service logs in ${path.join(dataDir, 'logs')}\n` +
      `durable-csi flags: ${cluster.driverFlags().join(' ')}\n` +
      `temporal flags:    ${cluster.cliFlags().join(' ')}\n` +
      `pids: ${Object.values(cluster.services)
        .map((service) => `${service.name}=${String(service.pid)}`)
        .join(' ')}; PostgreSQL on 127.0.0.1:${cluster.postgres.port}\n`,
  );
  const stop = () => {
    progress('stopping');
    void cluster.stop().finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`temporal-prod: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
