import type { DurableTarget, PoolView } from './durable';
import { runDurableLevel } from './durable';
import { CostMeter } from './phase-cost';
import type { ProcessWatch, ResidentMb } from './process-usage';
import type { LevelResult } from './report';

export interface LifecycleSample {
  /** Lifecycles (create + delete of one volume) done when the sample was taken. */
  lifecycles: number;
  resident: Record<string, ResidentMb>;
}

export interface LifecycleResult {
  concurrency: number;
  batch: number;
  samples: LifecycleSample[];
  /**
   * Per role, RSS at the end minus RSS after the first batch (MB): the first batch fills caches and compiles
   * code, so growth is what the later batches added. The end is the lower of the last two samples, so that one
   * sample taken just before a garbage collection does not read as growth.
   */
  growthMb: Record<string, number>;
}

/** How long each sample waits after its batch, so that the figure is of a process at rest, not mid-collection. */
const SETTLE_MS = 2_000;

/**
 * `count` lifecycles at `concurrency` in batches of `batch` (each batch creates its volumes, then deletes them),
 * sampling every role's RSS after each. `onLevel` checks each batch as a level (failures, leftovers).
 */
export async function runLifecycles(
  target: DurableTarget<PoolView>,
  watch: ProcessWatch,
  runId: string,
  options: { count: number; batch: number; concurrency: number },
  onLevel: (level: LevelResult) => void,
  progress: (message: string) => void,
): Promise<LifecycleResult> {
  const meter = new CostMeter(watch, undefined);
  const samples: LifecycleSample[] = [];
  for (let done = 0; done < options.count;) {
    const ops = Math.min(options.batch, options.count - done);
    onLevel(await runDurableLevel(target, meter, `${runId}-life${done}`, options.concurrency, ops));
    done += ops;
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    samples.push({ lifecycles: done, resident: watch.resident() });
    progress(`lifecycles: ${done} of ${options.count}`);
  }
  return { concurrency: options.concurrency, batch: options.batch, samples, growthMb: lifecycleGrowth(samples) };
}

export function lifecycleGrowth(samples: readonly LifecycleSample[]): Record<string, number> {
  const [first, ...later] = samples;
  if (!first || later.length === 0) return {};
  const lastTwo = later.slice(-2);
  const out: Record<string, number> = {};
  for (const role of Object.keys(first.resident)) {
    const end = Math.min(...lastTwo.map((sample) => sample.resident[role]?.rss ?? Infinity));
    const start = first.resident[role]?.rss;
    if (start !== undefined && Number.isFinite(end)) out[role] = end - start;
  }
  return out;
}
