import fs from 'node:fs';
import type { ProdTemporal } from '../temporal-prod/prod-temporal';

export default async function globalTeardownProd(): Promise<void> {
  const state = (globalThis as Record<string, unknown>).__durableCsiProdTemporal as
    { server: ProdTemporal; dataDir: string } | undefined;
  if (!state) return;
  const died = state.server.unexpectedExits();
  await state.server.stop();
  if (died.length > 0) {
    // Kept for the post-mortem; a service dying on its own means the runs against it proved nothing.
    throw new Error(
      `production-style Temporal services died during the run: ${died.join('; ')} (logs in ${state.dataDir})`,
    );
  }
  fs.rmSync(state.dataDir, { recursive: true, force: true });
}
