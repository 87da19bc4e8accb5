/** Latency statistics for the benchmark. All times are milliseconds. */
export interface LatencyStats {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
  /** Wall-clock time from the first call's start to the last call's answer. */
  wallMs: number;
  opsPerSec: number;
}

/** Linear interpolation between closest ranks (the usual "type 7" definition); NaN for no samples. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  const lowValue = sorted[low] ?? NaN;
  const highValue = sorted[high] ?? NaN;
  return lowValue + (highValue - lowValue) * (rank - low);
}

export function summarize(latencies: readonly number[], wallMs: number): LatencyStats {
  const sorted = [...latencies].sort((a, b) => a - b);
  const count = sorted.length;
  return {
    count,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    mean: count === 0 ? NaN : sorted.reduce((sum, value) => sum + value, 0) / count,
    min: sorted[0] ?? NaN,
    max: sorted[count - 1] ?? NaN,
    wallMs,
    opsPerSec: wallMs > 0 ? (count * 1000) / wallMs : NaN,
  };
}

/** Runs task(item) for every item with at most `concurrency` in flight; resolves when all have settled. */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  task: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      await task(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, lane));
}

/** The least-squares slope of ys against xs; NaN with fewer than two points. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  if (xs.length < 2) return NaN;
  const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const meanX = mean(xs);
  const meanY = mean(ys);
  let covariance = 0;
  let variance = 0;
  xs.forEach((x, index) => {
    covariance += (x - meanX) * ((ys[index] ?? NaN) - meanY);
    variance += (x - meanX) ** 2;
  });
  return covariance / variance;
}
