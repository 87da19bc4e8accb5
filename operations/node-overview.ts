import type { Client } from '@temporalio/client';
import { readNodeViews, readRegistryTable } from '../activities/control-activities';
import type { ForgottenNode, NodeView } from '../common/registry-types';
import { FORGOTTEN_MEMO_KEY } from '../common/registry-types';
import { listPendingOperations } from './pending-operations';

export interface NodeOverview {
  nodes: (NodeView & { pending: number })[];
  forgotten: ForgottenNode[];
}

/** Every registered node with its count of running operations, then the nodes operators forgot. */
export async function readNodeOverview(client: Client, driverName: string): Promise<NodeOverview> {
  const [views, forgotten, pending] = await Promise.all([
    readNodeViews(client, driverName),
    readForgottenNodes(client, driverName),
    listPendingOperations(client, driverName),
  ]);
  const counts = new Map<string, number>();
  for (const operation of pending) {
    if (operation.nodeId) counts.set(operation.nodeId, (counts.get(operation.nodeId) ?? 0) + 1);
  }
  return { nodes: views.map((view) => ({ ...view, pending: counts.get(view.nodeId) ?? 0 })), forgotten };
}

/** The registry memo's forgotten nodes; empty before the first node has reported. */
export async function readForgottenNodes(client: Client, driverName: string): Promise<ForgottenNode[]> {
  const records = await readRegistryTable<ForgottenNode>(client, driverName, FORGOTTEN_MEMO_KEY);
  return records.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
}
