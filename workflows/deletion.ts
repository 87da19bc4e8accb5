import { proxyActivities, setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { NodeActivities, NodeDeleteInput, NodeDeleteOutcome } from '../activities/node-activities';
import { PhaseKey, type ForgetNotice, type WrittenOffVolume } from '../common/names';
import { deleteOptions, followNodeLiveness, listenForForget, recordWriteOff } from './node-work';

/**
 * Deleting a volume (deleteVolume) or a snapshot copy (deleteSnapshot) on its home node and nowhere else. The node
 * activity has no schedule-to-start timeout: when the node is down (or unknown: no record is proof that a volume
 * does not exist) the task simply waits in the node's queue until its agent returns. Retries never give up; only the
 * node's pool (`deleted`, `absent`, `pool-replaced`) or the decision that the node is gone for good (`durable-csi
 * nodes forget`, recorded as the outcome `node-forgotten`) ends it.
 */
export interface DeleteVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
  /**
   * The node's liveness as its record showed when the request arrived: only what operators see depends on it.
   * Undefined when no record exists (the node is unknown). The controller starts the workflow with the matching
   * phase (search attributes set at start cost no extra write).
   */
  nodeLive?: boolean;
  /** The node was already forgotten for good when the request arrived: the recorded decision ends the deletion. */
  forgotten?: ForgetNotice;
}

export interface DeleteSnapshotInput extends Omit<DeleteVolumeInput, 'volumeId'> {
  snapshotId: string;
}

export interface DeletionResult {
  outcome: NodeDeleteOutcome | 'node-forgotten';
  nodeId: string;
  /** For node-forgotten: the operator's reason. */
  reason?: string;
}

export type DeleteVolumeResult = DeletionResult;
export type DeleteSnapshotResult = DeletionResult;

export async function deleteVolume(input: DeleteVolumeInput): Promise<DeleteVolumeResult> {
  return deleteOnItsNode({ ...input, id: input.volumeId, kind: 'volume' });
}

export async function deleteSnapshot(input: DeleteSnapshotInput): Promise<DeleteSnapshotResult> {
  return deleteOnItsNode({ ...input, id: input.snapshotId, kind: 'snapshot' });
}

interface Deletion extends Omit<DeleteVolumeInput, 'volumeId'> {
  /** The volume ID or the snapshot ID. */
  id: string;
  kind: 'volume' | 'snapshot';
}

async function deleteOnItsNode(deletion: Deletion): Promise<DeletionResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  if (deletion.forgotten) return writtenOff(deletion, deletion.forgotten);
  // The controller started this workflow with the node ID and the phase matching `nodeLive`.
  const doing = deletion.kind === 'volume' ? 'deletion' : 'snapshot deletion';
  liveness.waitOn({ nodeId: deletion.nodeId, doing }, deletion.nodeLive, workflowInfo().startTime, true);
  const summary = `delete ${deletion.kind} ${deletion.key} from the pool of ${deletion.nodeId}`;
  const onNode = proxyActivities<NodeActivities>(deleteOptions(deletion.driverName, deletion.nodeId, summary));
  const where: NodeDeleteInput = { key: deletion.key, poolIdPrefix: deletion.poolIdPrefix };
  const result = await untilForgotten(deletion.nodeId, () =>
    deletion.kind === 'volume' ? onNode.deleteVolumeOnNode(where) : onNode.deleteSnapshotOnNode(where),
  );
  liveness.stop();
  if (result.forgotten) return writtenOff(deletion, result.notice);
  return finish({ outcome: result.value, nodeId: deletion.nodeId });
}

/**
 * The node is gone for good, so nothing deleted the volume or copy. Before the CO is told it is gone, it is kept on
 * the node's record, which deletes it for real should the node ever return with this pool.
 */
async function writtenOff(deletion: Deletion, notice: ForgetNotice): Promise<DeletionResult> {
  const volume: WrittenOffVolume = {
    volumeId: deletion.id,
    key: deletion.key,
    poolIdPrefix: deletion.poolIdPrefix,
    reason: notice.reason,
    ...(deletion.kind === 'snapshot' && { kind: 'snapshot' as const }),
  };
  await recordWriteOff(deletion.driverName, deletion.nodeId, volume);
  return finish({ outcome: 'node-forgotten', nodeId: deletion.nodeId, reason: notice.reason });
}

function finish(result: DeletionResult): DeletionResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
