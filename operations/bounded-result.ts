import type { Client, WorkflowHandle } from '@temporalio/client';
import { isGrpcCancelledError, isGrpcDeadlineError } from '@temporalio/client';
import type { Workflow, WorkflowResultType } from '@temporalio/common';

export type Bounded<T> = { done: true; value: T } | { done: false };

/**
 * Temporal's frontend answers a result long poll at once, empty, when the call's deadline is less than a second
 * away (its long-poll tail room), and the SDK then polls again: a wait bounded by the poll's own deadline spun
 * through 20 to 30 polls in its last second. The poll's deadline therefore lies beyond the wait, and the wait is
 * ended by cancelling the poll.
 */
export const LONG_POLL_TAIL_ROOM_MS = 1_500;

/**
 * Waits at most `waitMs` for a workflow's result. The poll is cancelled when the wait ends, so a CSI call that
 * gives up leaves no poll behind.
 */
export async function boundedResult<W extends Workflow>(
  client: Client,
  handle: WorkflowHandle<W>,
  waitMs: number,
): Promise<Bounded<WorkflowResultType<W>>> {
  const waited = new AbortController();
  const timer = setTimeout(() => waited.abort(), waitMs);
  try {
    const value = await client.withAbortSignal(waited.signal, () =>
      client.withDeadline(Date.now() + waitMs + LONG_POLL_TAIL_ROOM_MS, () => handle.result()),
    );
    return { done: true, value };
  } catch (error) {
    if (waited.signal.aborted || isGrpcDeadlineError(error) || isGrpcCancelledError(error)) return { done: false };
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
