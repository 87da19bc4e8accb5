import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProdTemporal } from '../temporal-prod/prod-temporal';
import { PROD_CONFIG_ENV } from './test-temporal';

/**
 * The production-style Temporal for the `prod-temporal` project (docs/temporal-cluster.md). It fails loudly, with
 * the command that fixes it, when the server is not installed or cannot start: those suites never skip.
 */
export default async function globalSetupProd(): Promise<void> {
  const cli = path.join(__dirname, '..', '..', 'dist', 'cli', 'main.js');
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run "npm run build" (npm test does it) before jest`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-prod-temporal-'));
  const started = Date.now();
  const progress = (message: string) => process.stderr.write(`[prod-temporal] ${message}\n`);
  const server = await ProdTemporal.start({ dataDir, progress });
  progress(`ready in ${Math.round((Date.now() - started) / 1000)} s at ${server.address} (logs in ${dataDir}/logs)`);
  process.env[PROD_CONFIG_ENV] = JSON.stringify(server.connectionConfig());
  (globalThis as Record<string, unknown>).__durableCsiProdTemporal = { server, dataDir };
}
