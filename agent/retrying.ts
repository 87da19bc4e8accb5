import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../common/logger';

/** Delays between attempts: doubling from 1 s up to 30 s, so a long outage costs one attempt per 30 s. */
export function backoff(attempt: number, firstMs = 1_000, maxMs = 30_000): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(attempt, 16));
}

export class Stopped extends Error {
  constructor() {
    super('stopped');
  }
}

/**
 * Runs `attempt` until it resolves, logging every failure with the delay before the next one; rejects with
 * Stopped once `signal` aborts. `onFailure` hears each failure's message (the agent's readiness shows the last).
 */
export async function retrying<T>(
  what: string,
  attempt: () => Promise<T>,
  options: {
    logger: Logger;
    signal: AbortSignal;
    onFailure?: (message: string) => void;
    delayMs?: (n: number) => number;
  },
): Promise<T> {
  const delayMs = options.delayMs ?? ((n) => backoff(n));
  for (let n = 0; ; n++) {
    if (options.signal.aborted) throw new Stopped();
    try {
      return await attempt();
    } catch (error) {
      if (options.signal.aborted) throw new Stopped();
      const message = error instanceof Error ? error.message : String(error);
      const wait = delayMs(n);
      options.onFailure?.(message);
      options.logger.warn({ err: message, attempt: n + 1 }, `${what}: ${message}; retrying in ${wait / 1000} s`);
      await sleep(wait, undefined, { signal: options.signal }).catch(() => undefined);
    }
  }
}
