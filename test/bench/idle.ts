import type { ProcessWatch } from './process-usage';
import type { IdleFigures } from './report';

/** Each group's resident memory after settleMs of doing nothing, and the CPU it spent meanwhile (ms per second). */
export async function idleResident(watch: ProcessWatch, settleMs: number): Promise<IdleFigures> {
  const started = watch.begin();
  const at = performance.now();
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  const usage = watch.end(started);
  const seconds = (performance.now() - at) / 1000;
  const cpuMsPerSecond = Object.fromEntries(Object.entries(usage.cpuMs).map(([group, ms]) => [group, ms / seconds]));
  return { resident: watch.resident(), cpuMsPerSecond };
}
