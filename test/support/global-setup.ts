import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';

/**
 * One real Temporal dev server for the whole run. Tests isolate themselves by driver name (every task queue
 * and workflow ID is prefixed by it), not by mocking anything. Integration tests spawn the compiled CLI, so
 * dist/ must be built first: `npm test` does that; a missing build fails loudly here.
 */
export default async function globalSetup(): Promise<void> {
  const cli = path.join(__dirname, '..', '..', 'dist', 'cli', 'main.js');
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run "npm run build" (npm test does it) before jest`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-temporal-'));
  // Supervised: should jest die without its teardown, the kernel stops the server (temporal-dev/die-with-parent.ts).
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true, supervised: true });
  process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
  (globalThis as Record<string, unknown>).__durableCsiTemporal = { server, dataDir };
}
