import type { Client, WorkflowHandle, WorkflowStartOptions } from '@temporalio/client';
import {
  isGrpcCancelledError,
  isGrpcDeadlineError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
} from '@temporalio/client';
import type { SearchAttributePair, Workflow, WorkflowResultType } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import { formatDuration } from '../common/duration';
import { DriverError, FailureType } from '../common/failures';
import { nodeForgottenSignal, PhaseKey, WaitingSinceKey, type ForgetNotice } from '../common/names';
import { readNodeRecord, type NodeRecordView } from '../node-records/reads';

/**
 * How the controller runs an operation: it starts the operation's workflow or attaches to the one running (workflow-ID
 * uniqueness is the only lock), waits a bounded time for its result, and otherwise answers ABORTED (retriable)
 * saying what the operation waits for, while it keeps running durably. A create under a name whose earlier volume or
 * snapshot was deleted starts again only for a request sent after that deletion (attachToCreate).
 */
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
 * The task queue priority of every workflow a CSI call starts (Temporal's priority keys run from 1, first, to 5; the
 * default is 3). The node records share the controller's queue with the calls, and a storm of liveness changes (a
 * rolling restart of thousands of agents) once queued thousands of record tasks ahead of every CreateVolume: the
 * calls answered ABORTED for minutes while no node was at fault (docs/scale.md, 5,000 nodes). With a key ahead of the
 * records', a call's workflow tasks (and, inherited, its node activities) are dispatched before any backlog of
 * theirs. A call's work is bounded by the CO's own concurrency, so the records are delayed, never starved. Servers
 * without priority matching ignore the key.
 */
export const CSI_CALL_PRIORITY = { priorityKey: 2 } as const;

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
      priority: CSI_CALL_PRIORITY,
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
  noun: 'volume' | 'snapshot' | 'group snapshot';
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

/**
 * The operation's result within `waitMs`, else ABORTED saying how long it has waited for its node and why: a
 * deletion, an expansion or a snapshot waits for its node for as long as the node is down.
 */
export async function resultOrWait<W extends Workflow>(
  client: Client,
  driverName: string,
  handle: WorkflowHandle<W>,
  wait: { what: string; id: string; nodeId: string; waitMs: number },
): Promise<WorkflowResultType<W>> {
  const outcome = await boundedResult(client, handle, wait.waitMs);
  if (outcome.done) return outcome.value;
  const [description, record] = await Promise.all([handle.describe(), readNodeRecord(client, driverName, wait.nodeId)]);
  throw new DriverError(
    FailureType.Aborted,
    describeWait(wait.what, wait.id, wait.nodeId, record, description.startTime, new Date()),
  );
}

/**
 * The message an operator (and the CO's events) sees while an operation waits: which node, for how long, when
 * it was last heard from, and for a node with no record how to end the wait.
 */
export function describeWait(
  operation: string,
  volumeId: string,
  nodeId: string,
  record: NodeRecordView | undefined,
  started: Date,
  now: Date,
): string {
  const waited = formatDuration(now.getTime() - started.getTime());
  const node = record?.node;
  if (!node) {
    return (
      `${operation} of ${volumeId} has waited ${waited} for node ${nodeId}, which is unknown to this driver (no ` +
      'agent has registered it, or its record was lost); it completes when the node agent runs it. If the node ' +
      `is gone for good: durable-csi nodes forget ${nodeId} --reason "..."`
    );
  }
  const heard = formatDuration(now.getTime() - node.lastHeartbeat);
  const state = node.live ? '' : ', considered offline';
  return (
    `${operation} of ${volumeId} has waited ${waited} for node ${nodeId} (last heartbeat ${heard} ago${state}); ` +
    'it completes when the node agent runs it'
  );
}

/**
 * A deletion that started just before its node was forgotten (its controller read the record a moment too early,
 * and the forget's visibility query did not list it yet) would wait for ever: every later call that sees the
 * decision hands it over. A run started by this call has it in its input already; one that has ended ignores it.
 */
export async function deliverForget(handle: WorkflowHandle, notice: ForgetNotice): Promise<void> {
  try {
    await handle.signal(nodeForgottenSignal, notice);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error; // completed meanwhile: nothing waits
  }
}

/** The phase an operation on the node starts in (its workflow follows the node from there). */
export function phaseAttributes(record: NodeRecordView | undefined): SearchAttributePair[] {
  if (record?.node?.live) return [{ key: PhaseKey, value: 'running' }];
  return [
    { key: PhaseKey, value: 'waiting-for-node' },
    { key: WaitingSinceKey, value: new Date() },
  ];
}

/** The one-line summary's tail for an operation that starts while its node is down or unknown. */
export function waitingSuffix(record: NodeRecordView | undefined): string {
  if (record?.node?.live) return '';
  const since = new Date().toISOString().slice(11, 19);
  return record?.node
    ? `: waiting for the node since ${since} UTC`
    : `: waiting for a node with no record (unknown) since ${since} UTC`;
}

/** Markdown shown under Details in the Temporal UI: the request (never its secrets) and the node as last seen. */
export function requestDetails(request: string, nodeId: string, record: NodeRecordView | undefined): string {
  const node = record?.node;
  const state = node
    ? `${node.live ? 'live' : 'offline'}, last heartbeat ${new Date(node.lastHeartbeat).toISOString()}`
    : 'no record (no agent has registered it); if it is gone for good: `durable-csi nodes forget ' +
      nodeId +
      ' --reason ...`';
  return [
    `**Request**: ${request}`,
    `**Node**: ${nodeId}, ${state} (when the operation started; the phase follows the node since)`,
    'Attempts and waits so far: see Pending Activities and the timeline.',
  ].join('\n\n');
}
