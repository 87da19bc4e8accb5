import {
  ApplicationFailure,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { NodeActivities, NodeDeleteOutcome } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import {
  PhaseKey,
  formatGroupSnapshotId,
  formatSnapshotId,
  formatVolumeId,
  poolIdPrefix,
  type ForgetNotice,
} from '../common/names';
import { deleteOptions, followNodeLiveness, listenForForget, recordWriteOff, snapshotOptions } from './node-work';

/**
 * Group snapshots (CSI GroupController, docs/snapshots.md "Group snapshots"): the same truth rules as a snapshot's
 * create and deletion (workflows/create-snapshot.ts, workflows/node-work.ts), for a group of volumes of one node.
 * One node activity makes or deletes every member: the members are copies of that node's pool, of one instant.
 */

export interface GroupMember {
  sourceVolumeId: string;
  sourceKey: string;
  /** The pool prefix of the member volume's ID. */
  sourcePoolIdPrefix: string;
  /** Random, chosen by the controller whose start made the run, as a snapshot's key (operations/snapshot-key.ts). */
  snapshotKey: string;
}

export interface CreateVolumeGroupSnapshotInput {
  driverName: string;
  /** The CO's name (CreateVolumeGroupSnapshotRequest.name): the workflow ID. */
  name: string;
  nodeId: string;
  /** The pool prefix of the members' IDs (one pool: one node). */
  poolIdPrefix: string;
  /** Random, one per run, as a snapshot key. */
  groupKey: string;
  members: GroupMember[];
  /** The node's liveness as its record showed when the request arrived (undefined: no record). */
  nodeLive?: boolean;
}

export interface GroupMemberSnapshot {
  snapshotId: string;
  sourceVolumeId: string;
  sizeBytes: number;
  createdAt: string;
}

export interface CreateVolumeGroupSnapshotResult {
  groupSnapshotId: string;
  nodeId: string;
  /** ISO 8601: the instant every member was copied at (they share it). */
  createdAt: string;
  snapshots: GroupMemberSnapshot[];
}

/**
 * Makes every member on the volumes' node. As for a snapshot, the node activity has no schedule-to-start timeout
 * (a node that is down: the group waits in its queue, the CSI call answers ABORTED) and the node's create is
 * idempotent by the group's key. A node forgotten for good ends the wait: the members that may have been made are
 * written off on the node's record, which deletes them should the node return with this pool.
 */
export async function createVolumeGroupSnapshot(
  input: CreateVolumeGroupSnapshotInput,
): Promise<CreateVolumeGroupSnapshotResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  liveness.waitOn({ nodeId: input.nodeId, doing: 'group snapshot' }, input.nodeLive, workflowInfo().startTime, true);
  const summary = `group snapshot "${input.name}" of ${input.members.length} volumes`;
  const onNode = proxyActivities<NodeActivities>(snapshotOptions(input.driverName, input.nodeId, summary));
  const result = await untilForgotten(input.nodeId, () =>
    onNode.createGroupSnapshotOnNode({
      groupKey: input.groupKey,
      name: input.name,
      members: input.members.map(({ snapshotKey, sourceKey, sourcePoolIdPrefix }) => ({
        snapshotKey,
        sourceKey,
        sourcePoolIdPrefix,
      })),
    }),
  );
  liveness.stop();
  if (result.forgotten) {
    const copies = input.members.map((member) => ({ key: member.snapshotKey, poolIdPrefix: input.poolIdPrefix }));
    await writeOffMembers(input.driverName, input.nodeId, copies, result.notice.reason);
    upsertSearchAttributes([{ key: PhaseKey, value: 'failed' }]);
    throw ApplicationFailure.create({
      type: FailureType.NotFound,
      message: `node ${input.nodeId} was forgotten (${result.notice.reason}); the group's volumes are gone with it`,
      nonRetryable: true,
    });
  }
  const made = result.value;
  // As for a snapshot: the IDs name the node and pool that answered.
  const where = { nodeId: made.nodeId, poolIdPrefix: poolIdPrefix(made.poolId) };
  const groupSnapshotId = formatGroupSnapshotId({ ...where, key: made.groupKey });
  const snapshots = made.snapshots.map((snapshot) => ({
    snapshotId: formatSnapshotId({ ...where, key: snapshot.key }),
    sourceVolumeId: formatVolumeId({ ...where, key: snapshot.sourceKey }),
    sizeBytes: snapshot.sizeBytes,
    createdAt: snapshot.createdAt,
  }));
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${groupSnapshotId}`);
  return { groupSnapshotId, nodeId: made.nodeId, createdAt: snapshots[0]?.createdAt ?? '', snapshots };
}

export interface DeleteVolumeGroupSnapshotInput {
  driverName: string;
  groupSnapshotId: string;
  nodeId: string;
  poolIdPrefix: string;
  groupKey: string;
  /** The members' snapshot keys, from the CO's snapshot_ids (checked by the controller to be of this node and pool). */
  memberKeys: string[];
  nodeLive?: boolean;
  /** The node was already forgotten for good when the request arrived. */
  forgotten?: ForgetNotice;
}

export interface DeleteVolumeGroupSnapshotResult {
  outcome: NodeDeleteOutcome | 'node-forgotten';
  nodeId: string;
  reason?: string;
}

/**
 * A group deletion has a snapshot deletion's rules (workflows/node-work.ts): it waits for its node, and ends only
 * with the node's pool's answer for every member (`deleted`, `absent`, `pool-replaced`) or the node forgotten for
 * good, which writes every member off on the node's record first.
 */
export async function deleteVolumeGroupSnapshot(
  input: DeleteVolumeGroupSnapshotInput,
): Promise<DeleteVolumeGroupSnapshotResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  if (input.forgotten) return writtenOff(input, input.forgotten);
  liveness.waitOn(
    { nodeId: input.nodeId, doing: 'group snapshot deletion' },
    input.nodeLive,
    workflowInfo().startTime,
    true,
  );
  const summary = `delete group snapshot ${input.groupKey} from the pool of ${input.nodeId}`;
  const onNode = proxyActivities<NodeActivities>(deleteOptions(input.driverName, input.nodeId, summary));
  const result = await untilForgotten(input.nodeId, () =>
    onNode.deleteGroupSnapshotOnNode({
      groupKey: input.groupKey,
      poolIdPrefix: input.poolIdPrefix,
      memberKeys: input.memberKeys,
    }),
  );
  liveness.stop();
  if (result.forgotten) return writtenOff(input, result.notice);
  return finish({ outcome: result.value, nodeId: input.nodeId });
}

async function writtenOff(
  input: DeleteVolumeGroupSnapshotInput,
  notice: ForgetNotice,
): Promise<DeleteVolumeGroupSnapshotResult> {
  const copies = input.memberKeys.map((key) => ({ key, poolIdPrefix: input.poolIdPrefix }));
  await writeOffMembers(input.driverName, input.nodeId, copies, notice.reason);
  return finish({ outcome: 'node-forgotten', nodeId: input.nodeId, reason: notice.reason });
}

/** Each member is written off as a snapshot copy: the node's record deletes it alone (asMember on the node). */
async function writeOffMembers(
  driverName: string,
  nodeId: string,
  copies: { key: string; poolIdPrefix: string }[],
  reason: string,
): Promise<void> {
  for (const copy of copies) {
    const volumeId = formatSnapshotId({ nodeId, poolIdPrefix: copy.poolIdPrefix, key: copy.key });
    await recordWriteOff(driverName, nodeId, { volumeId, ...copy, reason, kind: 'snapshot' });
  }
}

function finish(result: DeleteVolumeGroupSnapshotResult): DeleteVolumeGroupSnapshotResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
