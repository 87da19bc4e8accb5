import { CancellationScope } from '@temporalio/workflow';

/**
 * Starts work in its own cancellation scope, to be raced against a signal (a forget notice, a renewal): whoever
 * loses the race cancels it. `wrap` shapes the result inside the same `then`, so the promise chain, and with it
 * the order in which a replay settles the race, is exactly the one the callers had before sharing this.
 */
export function startCancellable<T, R>(
  work: () => Promise<T>,
  wrap: (value: T) => R,
): { finished: Promise<R>; cancel: () => void } {
  const scope = new CancellationScope();
  const running = scope.run(work);
  running.catch(() => undefined); // once cancelled, its failure is expected and ignored
  return { finished: running.then(wrap), cancel: () => scope.cancel() };
}
