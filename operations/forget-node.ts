import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { readNodeRecord } from '../activities/node-record-reads';
import { DriverError, FailureType } from '../common/failures';
import { controlTaskQueue, nodeRecordWorkflowId } from '../common/names';
import { isValidNodeId } from '../common/node-id';
import { formatDuration } from './describe-wait';
import type { ForgetNotice } from '../workflows/node-forgotten';
import { nodeForgottenSignal } from '../workflows/node-forgotten';
import { forgetNodeRecordSignal, type nodePresence } from '../workflows/node-presence';
import { NodeIdKey, OperationKey, PhaseKey } from '../workflows/search-attribute-keys';
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
 * still waiting for it ends with the outcome "node-forgotten". Refused for a live node, for a node with neither
 * a record nor pending operations, and without a reason. Safe to run again: it re-signals whatever is still
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
  const notice: ForgetNotice = record?.forgotten ?? { nodeId, reason: reason.trim(), at: new Date().toISOString() };
  if (!record?.forgotten)
    await client.workflow.signalWithStart<typeof nodePresence, [ForgetNotice]>('nodePresence', {
      workflowId: nodeRecordWorkflowId(driverName, nodeId),
      taskQueue: controlTaskQueue(driverName),
      args: [{ driverName, nodeId }],
      signal: forgetNodeRecordSignal,
      signalArgs: [notice],
      typedSearchAttributes: [
        { key: OperationKey, value: 'node' },
        { key: NodeIdKey, value: nodeId },
        { key: PhaseKey, value: 'forgotten' },
      ],
    });
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
