import type { Client } from '@temporalio/client';
import {
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import { status as grpcStatus } from '@grpc/grpc-js';
import { readNodeRecord } from '../node-records/reads';
import { DriverError, FailureType } from '../common/failures';
import {
  forgetNodeRecordUpdate,
  nodeForgottenSignal,
  nodeRecordStart,
  nodeRecordWorkflowId,
  isValidNodeId,
} from '../common/names';
import { formatDuration } from '../common/duration';
import type { ForgetNotice } from '../common/names';
import type { nodePresence } from '../workflows/node-presence';
import { listPendingOperations } from './pending-operations';

export interface ForgetOutcome {
  notice: ForgetNotice;
  /** Workflow IDs of the pending operations told to stop waiting. */
  released: string[];
}

export interface ForgetOptions {
  /**
   * The caller holds its own evidence that the node had volumes (the Node-deleted policy: its PVs), so a node
   * with neither a record nor pending operations is forgotten too: its record is made in the forgotten state.
   */
  allowUnregistered?: boolean;
}

/**
 * The explicit decision that a node is gone for good: it is recorded on the node's record (made if the node
 * never registered, so deletions of its volumes that arrive later end with the same outcome) and every operation
 * still waiting for it ends with the outcome "node-forgotten". Refused for a live node (by our read, and then by
 * the record itself), for a node with neither a record nor pending operations, and without a reason. Safe to run again: it re-signals whatever is still
 * pending, under the first decision.
 */
export async function forgetNode(
  client: Client,
  driverName: string,
  nodeId: string,
  reason: string,
  options: ForgetOptions = {},
) {
  if (!isValidNodeId(nodeId)) throw new DriverError(FailureType.InvalidArgument, `"${nodeId}" is not a node ID`);
  if (!reason.trim()) throw new DriverError(FailureType.InvalidArgument, 'a reason is required (--reason TEXT)');
  const [record, pending] = await Promise.all([
    readNodeRecord(client, driverName, nodeId),
    listPendingOperations(client, driverName, { nodeId }),
  ]);
  if (record?.node?.live) {
    const heard = formatDuration(Date.now() - record.node.lastHeartbeat);
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId} is live (last heartbeat ${heard} ago); stop its agent before forgetting it`,
    );
  }
  if (!record && pending.length === 0 && !options.allowUnregistered)
    throw new DriverError(FailureType.NotFound, `node ${nodeId} has no record and no pending operations`);
  // Forgotten before: release what visibility had not indexed then, under the original decision.
  const notice: ForgetNotice =
    record?.forgotten ?? (await askRecord(client, driverName, nodeId, { nodeId, reason: reason.trim(), at: now() }));
  const released: string[] = [];
  for (const operation of pending) {
    try {
      await client.workflow.getHandle(operation.workflowId, operation.runId).signal(nodeForgottenSignal, notice);
      released.push(operation.workflowId);
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error; // it finished since it was listed
    }
  }
  return { notice, released } satisfies ForgetOutcome;
}

/** How long the record has to decide: it needs a controller's worker, and none may be running. */
const DECISION_WAIT_MS = 20_000;
/** Between two asks while the record catches up with a presence hold that has already ended. */
const RECORD_CATCH_UP_MS = 500;

/**
 * The record decides, on its own state (an Update with a validator): our read above may be stale (its node may
 * be between presence holds, or have come back since), so a node the record sees live is refused there.
 * Starts the record first if it does not exist (a node that never registered), so later deletions find the
 * decision. Returns the decision the record keeps (the first one, if it was forgotten meanwhile).
 */
async function askRecord(client: Client, driverName: string, nodeId: string, notice: ForgetNotice) {
  const workflowId = nodeRecordWorkflowId(driverName, nodeId);
  await client.workflow.start<typeof nodePresence>('nodePresence', {
    ...nodeRecordStart(driverName, nodeId),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
  // Not the handle `start` returns: with USE_EXISTING it names the running run as the first of its chain, and a
  // record that has continued as new is then "not found". The latest run of the ID is the record.
  const handle = client.workflow.getHandle<typeof nodePresence>(workflowId);
  const deadline = Date.now() + DECISION_WAIT_MS;
  try {
    for (;;) {
      try {
        return await client.withDeadline(deadline, () =>
          handle.executeUpdate(forgetNodeRecordUpdate, { args: [notice] }),
        );
      } catch (error) {
        if (!(error instanceof WorkflowUpdateFailedError)) throw error;
        // The record refuses while it sees the node answering. When its presence hold has already stopped (our read
        // says offline: the server timed the dead agent's heartbeat out), the record learns so one workflow task
        // later: ask again until it has, or the node answers again (then the refusal stands), or the wait is over.
        const read = await readNodeRecord(client, driverName, nodeId);
        if (read?.node?.live !== false || Date.now() + RECORD_CATCH_UP_MS > deadline)
          throw new DriverError(FailureType.FailedPrecondition, error.cause?.message ?? error.message);
        await new Promise((resolve) => setTimeout(resolve, RECORD_CATCH_UP_MS));
      }
    }
  } catch (error) {
    if (error instanceof DriverError) throw error;
    if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isDeadline(error))
      throw new DriverError(
        FailureType.Unavailable,
        `the record of node ${nodeId} did not decide within ${DECISION_WAIT_MS / 1000} s (is a controller running?); ` +
          'nothing was released: run the command again (it may still be recorded once a controller runs the record)',
      );
    throw error;
  }
}

function isDeadline(error: unknown): boolean {
  return (error as { code?: number } | undefined)?.code === grpcStatus.DEADLINE_EXCEEDED;
}

function now(): string {
  return new Date().toISOString();
}
