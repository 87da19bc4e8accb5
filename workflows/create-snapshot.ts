import {
  ApplicationFailure,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { NodeActivities } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import { snapshotOptions, listenForForget, followNodeLiveness, recordWriteOff } from './node-work';
import { PhaseKey, VolumeIdKey, formatSnapshotId, poolIdPrefix } from '../common/names';

export interface CreateSnapshotInput {
  driverName: string;
  /** The CO's name (CreateSnapshotRequest.name): the workflow ID, and stored on the node. */
  name: string;
  sourceVolumeId: string;
  /** The source volume's node, pool prefix and key (parsed from its ID by the controller). */
  nodeId: string;
  poolIdPrefix: string;
  sourceKey: string;
  /**
   * Chosen at random by the controller whose start made this run (operations/snapshot-key.ts): every retry of the
   * run asks for the same key, and a later run of the name gets another (runs started before 2026-12 derived it from
   * the name and the source, so a re-create after a deletion reused the deleted copy's ID).
   */
  snapshotKey: string;
  /** The node's liveness as its record showed when the request arrived (undefined: no record); drives the phase. */
  nodeLive?: boolean;
}

export interface CreateSnapshotResult {
  snapshotId: string;
  sourceVolumeId: string;
  nodeId: string;
  sizeBytes: number;
  /** ISO 8601, as the node recorded it. */
  createdAt: string;
}

/**
 * Copies a volume on its own node, the only one holding its data. Like a deletion, the node activity has no
 * schedule-to-start timeout: for a node that is down the copy waits in its queue until the agent returns, and the
 * CSI call answers ABORTED meanwhile. The node's create is idempotent by key, so a retry finds the earlier copy.
 * A node forgotten for good ends the wait: its volumes, this one's source included, are gone.
 */
export async function createSnapshot(input: CreateSnapshotInput): Promise<CreateSnapshotResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  liveness.waitOn({ nodeId: input.nodeId, doing: 'snapshot' }, input.nodeLive, workflowInfo().startTime, true);
  const onNode = proxyActivities<NodeActivities>(
    snapshotOptions(input.driverName, input.nodeId, `snapshot ${input.sourceVolumeId} as "${input.name}"`),
  );
  const result = await untilForgotten(input.nodeId, () =>
    onNode.createSnapshotOnNode({
      snapshotKey: input.snapshotKey,
      sourceKey: input.sourceKey,
      sourcePoolIdPrefix: input.poolIdPrefix,
      name: input.name,
    }),
  );
  liveness.stop();
  if (result.forgotten) {
    // The copy may have been made before the node went (the answer lost): kept on the node's record, which deletes
    // it should the node return with this pool, as a create's allocation is.
    await writeOffCopy(input, result.notice.reason);
    upsertSearchAttributes([{ key: PhaseKey, value: 'failed' }]);
    throw ApplicationFailure.create({
      type: FailureType.NotFound,
      message: `node ${input.nodeId} was forgotten (${result.notice.reason}); volume ${input.sourceVolumeId} is gone with it`,
      nonRetryable: true,
    });
  }
  const made = result.value;
  // As for volumes: the ID names the node and pool that answered, not the workflow's idea of them.
  const snapshotId = formatSnapshotId({ nodeId: made.nodeId, poolIdPrefix: poolIdPrefix(made.poolId), key: made.key });
  upsertSearchAttributes([
    { key: PhaseKey, value: 'done' },
    { key: VolumeIdKey, value: input.sourceVolumeId },
  ]);
  setCurrentDetails(`done: ${snapshotId}`);
  return {
    snapshotId,
    sourceVolumeId: input.sourceVolumeId,
    nodeId: made.nodeId,
    sizeBytes: made.sizeBytes,
    createdAt: made.createdAt,
  };
}

async function writeOffCopy(input: CreateSnapshotInput, reason: string): Promise<void> {
  const where = { nodeId: input.nodeId, poolIdPrefix: input.poolIdPrefix, key: input.snapshotKey };
  const copy = { volumeId: formatSnapshotId(where), key: input.snapshotKey, poolIdPrefix: input.poolIdPrefix, reason };
  await recordWriteOff(input.driverName, input.nodeId, { ...copy, kind: 'snapshot' });
}
