import type { Client, WorkflowHandle, WorkflowStartOptions } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { SearchAttributePair, Workflow, WorkflowResultType } from '@temporalio/common';
import { DriverError, FailureType } from '../common/failures';
import { readNodeRecord } from '../node-records/reads';
import { describeWait } from './describe-wait';

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

/** When a create call arrived, and whether its caller has given up on it (cancelled, or past its deadline). */
export interface CreateRequestTiming {
  receivedAt: Date;
  abandoned(): boolean;
}

/** A create workflow per name whose completed run's volume or snapshot may since have been deleted. */
export interface ReusableName<W extends Workflow> {
  /** What the name makes, for messages. */
  noun: 'volume' | 'snapshot';
  name: string;
  driverName: string;
  /** Starts the name's create workflow or attaches to it; `replaceCompleted` starts a new run after a completed one. */
  start(replaceCompleted: boolean): Promise<Attached<W>>;
  /** What a completed run made: its ID, its node, and the workflow ID of that ID's deletion. */
  made(result: WorkflowResultType<W>): { id: string; nodeId: string; deletionWorkflowId: string };
}

/**
 * Starts the name's create workflow or attaches to it. A completed run whose volume or snapshot has since been
 * deleted is started again (a new one under a new ID reusing the name), but only for a request sent after that
 * deletion: a stale retry reaching the controller late must not leak a copy nobody asks for any more. A deletion
 * still running answers ABORTED: answering its ID would hand the CO what its own deletion is about to remove.
 */
export async function attachToCreate<W extends Workflow>(
  client: Client,
  reusable: ReusableName<W>,
  request: CreateRequestTiming,
): Promise<WorkflowHandle<W>> {
  const { noun, name } = reusable;
  for (;;) {
    const attached = await reusable.start(false);
    if (!attached.completedEarlier) return attached.handle;
    const latest = await attached.handle.describe();
    if (latest.status.name !== 'COMPLETED') return attached.handle; // a run started since: attach to it
    const runId = latest.runId;
    const earlier = reusable.made(await client.workflow.getHandle<W>(attached.handle.workflowId, runId).result());
    const deletion = await deletionOf(client, earlier.deletionWorkflowId);
    if (!deletion || deletion.status === 'ENDED_OTHERWISE') return attached.handle;
    if (deletion.status === 'RUNNING') {
      const record = await readNodeRecord(client, reusable.driverName, earlier.nodeId);
      const what = noun === 'volume' ? 'deletion' : `${noun} deletion`;
      const waiting = describeWait(what, earlier.id, earlier.nodeId, record, deletion.startTime, new Date());
      throw new DriverError(
        FailureType.Aborted,
        `${noun} "${name}" was created as ${earlier.id}, whose deletion is still running (workflow ` +
          `${earlier.deletionWorkflowId}): ${waiting}. A new ${noun} is created for "${name}" once that deletion ` +
          'has ended: retry',
      );
    }
    if (request.receivedAt < deletion.startTime)
      throw new DriverError(
        FailureType.Aborted,
        `${noun} "${name}" (${earlier.id}) was deleted after this request arrived; ` +
          'only a request sent after the deletion creates it again: retry',
      );
    // A call frozen before it was read (a paused process) arrives late but is already abandoned by its caller.
    if (request.abandoned())
      throw new DriverError(FailureType.Aborted, `the caller gave up on this request to create "${name}"`);
    // Another request may have started the new run since we looked: judge that one instead of adding a second.
    if ((await attached.handle.describe()).runId !== runId) continue;
    return (await reusable.start(true)).handle;
  }
}

/**
 * A deletion's state: running (what it deletes may still be there, and will not be), completed (gone), or ended
 * otherwise (terminated by hand: what it was to delete may still be there, so it stands).
 */
interface Deletion {
  startTime: Date;
  status: 'RUNNING' | 'COMPLETED' | 'ENDED_OTHERWISE';
}

/** The deletion of that workflow ID, if one was ever asked. */
async function deletionOf(client: Client, workflowId: string): Promise<Deletion | undefined> {
  try {
    const description = await client.workflow.getHandle(workflowId).describe();
    const status = description.status.name;
    return {
      startTime: description.startTime,
      status: status === 'RUNNING' || status === 'COMPLETED' ? status : 'ENDED_OTHERWISE',
    };
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined;
    throw error;
  }
}
