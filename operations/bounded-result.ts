import type { Client, WorkflowHandle } from '@temporalio/client';
import { isGrpcCancelledError, isGrpcDeadlineError } from '@temporalio/client';
import type { Workflow, WorkflowResultType } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';

export type Bounded<T> = { done: true; value: T } | { done: false };

/**
 * Temporal's frontend ends a history long poll one second before the call's deadline, and answers at once when
 * less than that is left. The SDK's handle.result() polls again after each empty answer, so a wait bounded by
 * the call's deadline spun through hundreds of polls in its last second (392 in an 800 ms wait). One poll whose
 * deadline lies a tail room beyond the wait ends, empty, when the wait does.
 */
export const LONG_POLL_TAIL_ROOM_MS = 1_000;
/** temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT */
const CLOSE_EVENT = 2;
/** Less than this left of the wait after an empty answer: the wait is over. */
const REPOLL_MIN_MS = 100;

/**
 * Waits at most `waitMs` for a workflow's result, with a long poll that the server ends when the wait is over
 * (a CSI call that gives up leaves no poll behind). A failed or cancelled run throws as handle.result() does.
 */
export async function boundedResult<W extends Workflow>(
  client: Client,
  handle: WorkflowHandle<W>,
  waitMs: number,
): Promise<Bounded<WorkflowResultType<W>>> {
  const end = Date.now() + waitMs;
  const deadline = end + LONG_POLL_TAIL_ROOM_MS;
  try {
    for (;;) {
      const polled = Date.now();
      const response = await client.withDeadline(deadline, () =>
        client.workflowService.getWorkflowExecutionHistory({
          namespace: client.options.namespace,
          execution: { workflowId: handle.workflowId },
          waitNewEvent: true,
          historyEventFilterType: CLOSE_EVENT,
          skipArchival: true,
        }),
      );
      const closed = response.history?.events?.[0];
      if (closed) {
        const completed = closed.workflowExecutionCompletedEventAttributes;
        const payload = completed?.result?.payloads?.[0];
        if (completed && !completed.newExecutionRunId && payload)
          return { done: true, value: defaultPayloadConverter.fromPayload<WorkflowResultType<W>>(payload) };
        // Failed, cancelled, terminated, timed out or continued: the SDK turns the run's end into its usual error.
        return { done: true, value: await client.withDeadline(deadline, () => handle.result()) };
      }
      // The server also ends a poll at its own longest wait (20 s by default): poll again if time is left. An empty
      // answer at once means a server whose tail room exceeds ours: polling again would spin, so the wait ends.
      const answeredAtOnce = Date.now() - polled < LONG_POLL_TAIL_ROOM_MS;
      if (answeredAtOnce || end - Date.now() < REPOLL_MIN_MS) return { done: false };
    }
  } catch (error) {
    if (isGrpcDeadlineError(error) || isGrpcCancelledError(error)) return { done: false };
    throw error;
  }
}
