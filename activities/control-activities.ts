import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { registryWorkflowId } from '../common/names';
import type { NodeRecord, NodeView } from '../common/registry-types';
import { isLive, REGISTRY_MEMO_KEY } from '../common/registry-types';

/** Activities that run in the controller: reading the node registry (a workflow cannot query another). */
export function createControlActivities(deps: { client: Client; driverName: string }) {
  return {
    async readRegistry(): Promise<NodeView[]> {
      return readNodeViews(deps.client, deps.driverName);
    },
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;

/**
 * One table of the registry's memo, read through DescribeWorkflow (answered by the server, no worker needed);
 * empty before the first node has reported.
 */
export async function readRegistryTable<T>(client: Client, driverName: string, memoKey: string): Promise<T[]> {
  let memo: Record<string, unknown> | undefined;
  try {
    memo = (await client.workflow.getHandle(registryWorkflowId(driverName)).describe()).memo;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return [];
    throw error;
  }
  return Object.values((memo?.[memoKey] ?? {}) as Record<string, T>);
}

/** Every registered node with its liveness; empty before the first node has reported. */
export async function readNodeViews(client: Client, driverName: string): Promise<NodeView[]> {
  const records = await readRegistryTable<NodeRecord>(client, driverName, REGISTRY_MEMO_KEY);
  const now = Date.now();
  return records
    .map((record) => ({ ...record, live: isLive(record, now) }))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
}
