import fs from 'node:fs';
import type { DevServer } from '../../temporal-dev/dev-server';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as Record<string, unknown>).__durableCsiTemporal as
    { server: DevServer; dataDir: string } | undefined;
  if (!state) return;
  await state.server.stop();
  fs.rmSync(state.dataDir, { recursive: true, force: true });
}
