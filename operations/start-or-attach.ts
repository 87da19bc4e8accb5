import type { Client, WorkflowHandle, WorkflowStartOptions } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import type { Workflow } from '@temporalio/common';

export interface StartOrAttachOptions<W extends Workflow> {
  workflowId: string;
  taskQueue: string;
  args: Parameters<W>;
  memo?: Record<string, unknown>;
  searchAttributes?: SearchAttributePair[];
  staticSummary?: string;
  staticDetails?: string;
  /** Start again even when a completed run exists (only after proving that run's effect is gone). */
  replaceCompleted?: boolean;
  /**
   * Ask the server to hand the first workflow task straight back to this process's worker (the client must share
   * the worker's NativeConnection): one dispatch through the server's queues fewer per operation.
   */
  eagerStart?: boolean;
}

export interface Attached<W extends Workflow> {
  handle: WorkflowHandle<W>;
  /** True when an earlier run had already completed and this request attached to its result. */
  completedEarlier: boolean;
}

/**
 * Workflow-ID uniqueness is the only lock: a request starts the workflow for its ID or attaches to the one
 * running (from any controller replica). A completed run is reused, a failed one is started again.
 */
export async function startOrAttach<W extends Workflow>(
  client: Client,
  workflow: string,
  options: StartOrAttachOptions<W>,
): Promise<Attached<W>> {
  try {
    const startOptions = {
      workflowId: options.workflowId,
      taskQueue: options.taskQueue,
      args: options.args,
      memo: options.memo,
      typedSearchAttributes: options.searchAttributes,
      staticSummary: options.staticSummary,
      staticDetails: options.staticDetails,
      requestEagerStart: options.eagerStart,
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: options.replaceCompleted ? 'ALLOW_DUPLICATE' : 'ALLOW_DUPLICATE_FAILED_ONLY',
    } as unknown as WorkflowStartOptions<W>; // generic W defeats the args conditional type
    const handle = await client.workflow.start<W>(workflow, startOptions);
    return { handle, completedEarlier: false };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { handle: client.workflow.getHandle<W>(options.workflowId), completedEarlier: true };
  }
}
