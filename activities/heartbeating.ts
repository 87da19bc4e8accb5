import { heartbeat } from '@temporalio/activity';

const INTERVAL_MS = 1000;

/**
 * Heartbeats while the body runs, so a node agent that dies mid-activity is noticed after the heartbeat
 * timeout (seconds) instead of the start-to-close timeout (which must allow for slow formatting).
 *
 * No heartbeat at the start: the server times the heartbeat timeout from the attempt's start until the first
 * heartbeat, so a death before it is noticed just the same, and the many activities that finish within the
 * interval save a heartbeat RPC and a mutable-state write each (docs/performance.md).
 */
export async function whileHeartbeating<T>(body: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => heartbeat(), INTERVAL_MS);
  try {
    return await body();
  } finally {
    clearInterval(timer);
  }
}
