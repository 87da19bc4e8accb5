import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { OpResult } from './report';
import { runPool, summarize } from './stats';

/** Told of each retriable answer that was retried, by gRPC status name. */
export type OnRetry = (code: string) => void;

export interface Measured<R> {
  /** One entry per item: the operation's value, or undefined if it failed for good. */
  values: (R | undefined)[];
  result: OpResult;
}

const MAX_FAILURE_SAMPLES = 5;

/**
 * Runs op(item) for every item with `concurrency` in flight. A call's latency runs from its first attempt to
 * its final answer, retries included; failed calls are counted, not timed.
 */
export async function measure<T, R>(
  items: readonly T[],
  concurrency: number,
  op: (item: T, onRetry: OnRetry) => Promise<R>,
): Promise<Measured<R>> {
  const values: (R | undefined)[] = new Array<R | undefined>(items.length).fill(undefined);
  const latencies: number[] = [];
  const retryCodes: Record<string, number> = {};
  const failureSamples: string[] = [];
  let retries = 0;
  let retriedCalls = 0;
  let failures = 0;
  const started = performance.now();
  await runPool(items, concurrency, async (item, index) => {
    const callStart = performance.now();
    let callRetries = 0;
    const onRetry: OnRetry = (code) => {
      callRetries++;
      retryCodes[code] = (retryCodes[code] ?? 0) + 1;
    };
    try {
      values[index] = await op(item, onRetry);
      latencies.push(performance.now() - callStart);
    } catch (error) {
      failures++;
      if (failureSamples.length < MAX_FAILURE_SAMPLES) failureSamples.push(messageOf(error));
    } finally {
      retries += callRetries;
      if (callRetries > 0) retriedCalls++;
    }
  });
  const wallMs = performance.now() - started;
  return {
    values,
    result: { stats: summarize(latencies, wallMs), retries, retriedCalls, retryCodes, failures, failureSamples },
  };
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Whatever a pool still holds of volumes: volume directories, records and journal intents. */
export function leftoversIn(poolRoot: string): string[] {
  return ['volumes', 'records', 'journal'].flatMap((dir) => {
    const full = path.join(poolRoot, dir);
    return fs.existsSync(full) ? fs.readdirSync(full).map((entry) => `${dir}/${entry}`) : [];
  });
}
