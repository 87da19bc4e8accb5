import { heartbeat } from '@temporalio/activity';

const INTERVAL_MS = 1000;

/**
 * Heartbeats while the body runs, so a node agent that dies mid-activity is noticed after the heartbeat
 * timeout (seconds) instead of the start-to-close timeout (which must allow for slow formatting).
 */
export async function whileHeartbeating<T>(body: () => Promise<T>): Promise<T> {
  heartbeat();
  const timer = setInterval(() => heartbeat(), INTERVAL_MS);
  try {
    return await body();
  } finally {
    clearInterval(timer);
  }
}
