import type { Client } from '@temporalio/client';
import { DriverError, FailureType } from '../../common/failures';
import { moveWorkflowId } from '../../common/names';
import { moveResult, startMove, startSnapshotMove } from '../../operations/move-operations';
import { call, withDeadline } from '../../csi/client';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import { findFreePort } from '../../temporal-dev/free-port';
import type { CsiClients } from '../../csi/client';
import type { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import type { Recording } from './snapshot-scenarios';

/**
 * Moves between two loop pools serving copies on loopback (node-m1 to node-m2), recorded for the replay test: one
 * that copies, one that rolls back because the target has no room for it, and a snapshot's move that copies.
 */
export async function recordMoveScenarios(
  cluster: TestCluster,
  clients: CsiClients,
  temporal: Client,
): Promise<Record<string, Recording>> {
  const { driverName } = cluster;
  for (const [nodeId, capacity] of [
    ['node-m1', '1Gi'],
    ['node-m2', '256Mi'],
  ] as const) {
    const extra = ['--transfer-port', String(await findFreePort()), '--transfer-address', '127.0.0.1'];
    await cluster.startNode(nodeId, { backend: 'loop', capacity, extra });
  }
  const ids: string[] = [];
  for (const [name, bytes] of [
    ['pvc-moved', 64 * MiB],
    ['pvc-too-large', 512 * MiB],
  ] as const) {
    const made = await retryLikeCo(() => createVolume(clients, createRequest(name, bytes, onNode('node-m1'))));
    ids.push(made.volume!.volume_id);
  }
  const [moved, tooLarge] = ids as [string, string];
  const copied = await startMove(temporal, driverName, { volumeId: moved, targetNodeId: 'node-m2' });
  await moveResult(temporal.workflow.getHandle(copied.workflowId));
  const refused = await startMove(temporal, driverName, { volumeId: tooLarge, targetNodeId: 'node-m2' });
  try {
    await moveResult(temporal.workflow.getHandle(refused.workflowId));
    throw new Error('expected the move to a pool without room to roll back');
  } catch (error) {
    if (!(error instanceof DriverError) || error.type !== FailureType.ResourceExhausted) throw error;
  }
  // A snapshot of the copied volume (still on node-m1: without Kubernetes a move leaves the source), moved too.
  const snapshot = await call<CreateSnapshotResponse__Output>((done) =>
    clients.controller.CreateSnapshot({ name: 'snap-moved', source_volume_id: moved }, withDeadline(30_000), done),
  );
  const snapshotId = snapshot.snapshot!.snapshot_id;
  const snapshotMove = await startSnapshotMove(temporal, driverName, { snapshotId, targetNodeId: 'node-m2' });
  await moveResult(temporal.workflow.getHandle(snapshotMove.workflowId));
  return {
    'move-volume': { workflowId: moveWorkflowId(driverName, moved) },
    'move-volume-rolled-back': { workflowId: moveWorkflowId(driverName, tooLarge) },
    'move-snapshot': { workflowId: moveWorkflowId(driverName, snapshotId) },
  };
}
