import { call, connectCsi, withDeadline } from '../csi/client';
import type { ProbeResponse__Output } from '../csi/generated/csi/v1/ProbeResponse';

/** Polls Probe on a CSI endpoint until it answers ready, or throws after timeoutMs. */
export async function waitUntilReady(endpoint: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < until) {
    const clients = connectCsi(endpoint);
    try {
      const probe = await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(2000), done));
      if (probe.ready?.value) return;
      last = 'not ready';
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    } finally {
      clients.close();
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${endpoint} did not become ready within ${timeoutMs} ms (${last})`);
}
