import { call, connectCsi, withDeadline } from '../csi/client';
import type { ProbeResponse__Output } from '../csi/generated/csi/v1/ProbeResponse';

/** Polls Probe on a CSI endpoint until it answers ready, or throws after timeoutMs. */
export async function waitUntilReady(endpoint: string, timeoutMs = 60_000): Promise<void> {
  await pollProbe(endpoint, timeoutMs, true);
}

/** Polls Probe until the endpoint answers at all; resolves with its readiness (false while it waits for Temporal). */
export function waitUntilProbeAnswers(endpoint: string, timeoutMs: number): Promise<boolean | undefined> {
  return pollProbe(endpoint, timeoutMs, false);
}

async function pollProbe(endpoint: string, timeoutMs: number, readyOnly: boolean): Promise<boolean | undefined> {
  const until = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < until) {
    const clients = connectCsi(endpoint);
    try {
      const probe = await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(2000), done));
      if (probe.ready?.value || !readyOnly) return probe.ready?.value;
      last = 'not ready';
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    } finally {
      clients.close();
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const what = readyOnly ? 'become ready' : 'answer Probe';
  throw new Error(`${endpoint} did not ${what} within ${timeoutMs} ms (${last})`);
}
