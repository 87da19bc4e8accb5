import type { Client } from '@temporalio/client';
import { readAllNodeRecords } from '../node-records/reads';
import type { ForgottenNode, NodeView } from '../common/names';
import { listPendingOperations } from './pending-operations';

export interface NodeOverview {
  /** `asOf`: epoch ms of the capacity figures (the agent's latest presence heartbeat, or its last report). */
  /** `writtenOff`: volumes and snapshots written off while it was forgotten, still to delete on its pool (0: none). */
  nodes: (NodeView & { pending: number; asOf: number; writtenOff: number })[];
  forgotten: ForgottenNode[];
  /** Nodes with pending operations but no record (no agent ever registered them, or the record was lost). */
  unknown: { nodeId: string; pending: number }[];
}

/** Every node with a record and its count of running operations, the forgotten ones, and unknown ones. */
export async function readNodeOverview(client: Client, driverName: string): Promise<NodeOverview> {
  const [fresh, pending] = await Promise.all([
    readAllNodeRecords(client, driverName),
    listPendingOperations(client, driverName),
  ]);
  const counts = new Map<string, number>();
  for (const operation of pending) {
    if (operation.nodeId) counts.set(operation.nodeId, (counts.get(operation.nodeId) ?? 0) + 1);
  }
  const nodes = fresh.flatMap((view) =>
    view.node && !view.forgotten
      ? [
          {
            ...view.node,
            pending: counts.get(view.nodeId) ?? 0,
            asOf: view.asOf ?? view.node.lastHeartbeat,
            writtenOff: view.writtenOff ?? 0,
          },
        ]
      : [],
  );
  const forgotten = fresh.flatMap((view) => (view.forgotten ? [view.forgotten] : []));
  const recorded = new Set(fresh.map((view) => view.nodeId));
  const unknown = [...counts.entries()]
    .filter(([nodeId]) => !recorded.has(nodeId))
    .map(([nodeId, count]) => ({ nodeId, pending: count }))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { nodes, forgotten, unknown };
}
