import type { Client } from '@temporalio/client';
import { readNodeViews } from '../activities/control-activities';
import { readForgottenNodes } from './node-overview';
import { DriverError, FailureType } from '../common/failures';
import { controlTaskQueue, registryWorkflowId } from '../common/names';
import { isValidNodeId } from '../common/node-id';
import { formatDuration } from './describe-wait';
import type { ForgetNotice } from '../workflows/node-forgotten';
import { nodeForgottenSignal } from '../workflows/node-forgotten';
import { forgetNodeSignal } from '../workflows/node-registry';

export interface ForgetOutcome {
  notice: ForgetNotice;
  /** Workflow IDs of the pending operations told to stop waiting. */
  released: string[];
}

/**
 * The explicit decision that a node is gone for good: it leaves the registry (reason kept) and every
 * operation still waiting for it ends with the outcome "node-forgotten". Refused for a node that is live or
 * unknown, and without a reason. Safe to run again: it re-signals whatever is still pending.
 */
export async function forgetNode(client: Client, driverName: string, nodeId: string, reason: string) {
  if (!isValidNodeId(nodeId)) throw new DriverError(FailureType.InvalidArgument, `"${nodeId}" is not a node ID`);
  if (!reason.trim()) throw new DriverError(FailureType.InvalidArgument, 'a reason is required (--reason TEXT)');
  const node = (await readNodeViews(client, driverName)).find((candidate) => candidate.nodeId === nodeId);
  const earlier = node ? undefined : (await readForgottenNodes(client, driverName)).find((f) => f.nodeId === nodeId);
  if (!node && !earlier) throw new DriverError(FailureType.NotFound, `node ${nodeId} is not registered`);
  if (node?.live) {
    const heard = formatDuration(Date.now() - node.lastHeartbeat);
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId} is live (last heartbeat ${heard} ago); stop its agent before forgetting it`,
    );
  }
  // Forgotten before: release what visibility had not indexed then, under the original decision.
  const notice: ForgetNotice = earlier ?? { nodeId, reason: reason.trim(), at: new Date().toISOString() };
  if (!earlier)
    await client.workflow.signalWithStart('nodeRegistry', {
      workflowId: registryWorkflowId(driverName),
      taskQueue: controlTaskQueue(driverName),
      args: [{ nodes: {} }],
      signal: forgetNodeSignal,
      signalArgs: [notice],
    });
  const released: string[] = [];
  const query = `DurableCsiNodeId = "${nodeId}" AND ExecutionStatus = "Running"`;
  for await (const workflow of client.workflow.list({ query })) {
    if (!workflow.workflowId.startsWith(`${driverName}/`) || workflow.type === 'nodeRegistry') continue;
    await client.workflow.getHandle(workflow.workflowId, workflow.runId).signal(nodeForgottenSignal, notice);
    released.push(workflow.workflowId);
  }
  return { notice, released } satisfies ForgetOutcome;
}
