import type { Client, WorkflowHandle } from '@temporalio/client';
import { isGrpcCancelledError, isGrpcDeadlineError } from '@temporalio/client';
import type { Workflow, WorkflowResultType } from '@temporalio/common';

export type Bounded<T> = { done: true; value: T } | { done: false };

/**
 * Waits at most `waitMs` for a workflow's result. The deadline is carried by the long poll itself, so a CSI
 * call that gives up leaves no poll behind.
 */
export async function boundedResult<W extends Workflow>(
  client: Client,
  handle: WorkflowHandle<W>,
  waitMs: number,
): Promise<Bounded<WorkflowResultType<W>>> {
  try {
    const value = await client.withDeadline(Date.now() + waitMs, () => handle.result());
    return { done: true, value };
  } catch (error) {
    if (isGrpcDeadlineError(error) || isGrpcCancelledError(error)) return { done: false };
    throw error;
  }
}
