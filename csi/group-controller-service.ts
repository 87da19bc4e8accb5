/**
 * The CSI GroupController service (docs/snapshots.md, "Group snapshots"): CreateVolumeGroupSnapshot,
 * DeleteVolumeGroupSnapshot and GetVolumeGroupSnapshot, for volumes of one node, with a snapshot's truth rules.
 * Every instance's Identity advertises GROUP_CONTROLLER_SERVICE (CSI: all instances report the same capabilities,
 * and csi-sanity asks the node's), and every controller serves GroupControllerGetCapabilities; group snapshots are
 * served only with --snapshots, as the snapshot calls are: without it the capability list is empty and the group
 * calls are UNIMPLEMENTED.
 */
import type { ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import type { SnapshotOperations } from '../operations/snapshot-operations';
import { answerDeletion, callAbandoned, callWaitMs } from './controller-service';
import { checkSnapshotParameters, toCsiSnapshot } from './controller-snapshots';
import type { CreateVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/CreateVolumeGroupSnapshotRequest';
import type { CreateVolumeGroupSnapshotResponse } from './generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import type { DeleteVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/DeleteVolumeGroupSnapshotRequest';
import type { GetVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/GetVolumeGroupSnapshotRequest';
import type { GetVolumeGroupSnapshotResponse } from './generated/csi/v1/GetVolumeGroupSnapshotResponse';
import type { VolumeGroupSnapshot } from './generated/csi/v1/VolumeGroupSnapshot';
import type { ListedSnapshot } from '../workflows/listing';
import { checkName } from './validate-create';

const CAPABILITIES = [{ rpc: { type: 'CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT' } }];

/** The most volumes one group snapshot takes: one node activity copies them all within one freeze. */
export const MAX_GROUP_MEMBERS = 64;

export function createGroupControllerService(
  snapshots: SnapshotOperations | undefined,
  options: { callWaitMs: number },
) {
  const capabilities = {
    GroupControllerGetCapabilities: async () => ({ capabilities: snapshots ? CAPABILITIES : [] }),
  };
  if (!snapshots) return capabilities;
  return {
    ...capabilities,

    async CreateVolumeGroupSnapshot(
      request: CreateVolumeGroupSnapshotRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<CreateVolumeGroupSnapshotResponse> {
      const receivedAt = new Date();
      const name = checkName(request.name);
      const ids = request.source_volume_ids ?? [];
      if (ids.length === 0) throw invalid('source_volume_ids is required: name the volumes to snapshot together');
      if (ids.some((id) => !id)) throw invalid('source_volume_ids: an empty volume ID');
      const repeated = ids.filter((id, index) => ids.indexOf(id) !== index);
      if (repeated.length > 0) throw invalid(`source_volume_ids: ${[...new Set(repeated)].join(', ')} named twice`);
      if (ids.length > MAX_GROUP_MEMBERS) {
        throw invalid(`source_volume_ids: ${ids.length} volumes, more than the ${MAX_GROUP_MEMBERS} a group takes`);
      }
      checkSnapshotParameters(request.parameters, 'group snapshots');
      const result = await snapshots.createGroup(name, ids, callWaitMs(call, options.callWaitMs), {
        receivedAt,
        abandoned: () => callAbandoned(call),
      });
      const members = result.snapshots.map((snapshot) => ({ ...snapshot, groupSnapshotId: result.groupSnapshotId }));
      return { group_snapshot: toCsiGroup(result.groupSnapshotId, members) };
    },

    async DeleteVolumeGroupSnapshot(
      request: DeleteVolumeGroupSnapshotRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ) {
      if (!request.group_snapshot_id) throw invalid('group_snapshot_id is required');
      return answerDeletion(call, options.callWaitMs, (waitMs) =>
        snapshots.deleteGroup(request.group_snapshot_id, request.snapshot_ids ?? [], waitMs),
      );
    },

    async GetVolumeGroupSnapshot(
      request: GetVolumeGroupSnapshotRequest__Output,
    ): Promise<GetVolumeGroupSnapshotResponse> {
      if (!request.group_snapshot_id) throw invalid('group_snapshot_id is required');
      const members = await snapshots.getGroup(request.group_snapshot_id, request.snapshot_ids ?? []);
      return { group_snapshot: toCsiGroup(request.group_snapshot_id, members) };
    },
  };
}

/** Ready once made: a create answers only when every member is recorded, as a snapshot's does. */
function toCsiGroup(groupSnapshotId: string, members: Omit<ListedSnapshot, 'nodeId' | 'name'>[]): VolumeGroupSnapshot {
  const snapshots = members.map((member) => toCsiSnapshot({ ...member, groupSnapshotId }));
  return {
    group_snapshot_id: groupSnapshotId,
    snapshots,
    creation_time: snapshots[0]?.creation_time ?? { seconds: '0', nanos: 0 },
    ready_to_use: true,
  };
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
