/**
 * CreateSnapshot, DeleteSnapshot and ListSnapshots (docs/snapshots.md), and the content source of CreateVolume.
 * Served only when the controller runs with --snapshots: until then the capabilities are not advertised and the
 * calls are UNIMPLEMENTED, as before.
 */
import type { ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import { parseSnapshotId } from '../common/snapshot-id';
import { parseVolumeId } from '../common/volume-id';
import { silentNode } from '../operations/snapshot-operations';
import type { SnapshotOperations } from '../operations/snapshot-operations';
import type { ListedSnapshot } from '../workflows/list-snapshots';
import { callAbandoned, callWaitMs } from './call-wait';
import { deleteOutcomeHeaders } from './delete-outcome';
import type { CreateSnapshotRequest__Output } from './generated/csi/v1/CreateSnapshotRequest';
import type { CreateSnapshotResponse } from './generated/csi/v1/CreateSnapshotResponse';
import type { DeleteSnapshotRequest__Output } from './generated/csi/v1/DeleteSnapshotRequest';
import type { ListSnapshotsRequest__Output } from './generated/csi/v1/ListSnapshotsRequest';
import type { ListSnapshotsResponse } from './generated/csi/v1/ListSnapshotsResponse';
import type { Snapshot } from './generated/csi/v1/Snapshot';
import { assertMaxEntries, listCoverageHeaders, unusableToken } from './list-coverage';
import { checkName } from './validate-create';

export const SNAPSHOT_CAPABILITIES = ['CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS', 'CLONE_VOLUME'];

/** Entries per ListSnapshots page at most, also when max_entries is 0 or larger. */
const MAX_SNAPSHOT_PAGE = 1000;

export function createSnapshotHandlers(snapshots: SnapshotOperations, options: { callWaitMs: number }) {
  return {
    async CreateSnapshot(
      request: CreateSnapshotRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<CreateSnapshotResponse> {
      const receivedAt = new Date();
      const name = checkName(request.name);
      if (!request.source_volume_id) throw invalid('source_volume_id is required');
      if (Object.keys(request.parameters ?? {}).length > 0) {
        throw invalid(
          `parameters: this driver takes none for snapshots (got ${Object.keys(request.parameters).join(', ')})`,
        );
      }
      const result = await snapshots.create(name, request.source_volume_id, callWaitMs(call, options.callWaitMs), {
        receivedAt,
        abandoned: () => callAbandoned(call),
      });
      return { snapshot: toCsiSnapshot(result) };
    },

    async DeleteSnapshot(request: DeleteSnapshotRequest__Output, call: ServerUnaryCall<unknown, unknown>) {
      if (!request.snapshot_id) throw invalid('snapshot_id is required');
      const result = await snapshots.delete(request.snapshot_id, callWaitMs(call, options.callWaitMs));
      call.sendMetadata(deleteOutcomeHeaders(result));
      return {};
    },

    async ListSnapshots(
      request: ListSnapshotsRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<ListSnapshotsResponse> {
      assertMaxEntries(request.max_entries);
      const token = request.starting_token;
      // A token is the last snapshot ID of the previous page.
      if (token && !parseSnapshotId(token)) throw unusableToken(token);
      const bySnapshot = request.snapshot_id ? parseSnapshotId(request.snapshot_id) : undefined;
      const bySource = request.source_volume_id ? parseVolumeId(request.source_volume_id) : undefined;
      // An ID this driver could not have issued names no snapshot: the list is empty (CSI), and no node is asked.
      if ((request.snapshot_id && !bySnapshot) || (request.source_volume_id && !bySource)) return { entries: [] };
      const nodes = [bySnapshot?.nodeId, bySource?.nodeId].filter((node): node is string => node !== undefined);
      if (new Set(nodes).size > 1) return { entries: [] };
      const listed = await snapshots.list(nodes.length > 0 ? [nodes[0]!] : undefined);
      // A lookup that names one node must not read its silence as "no such snapshot": only its pool knows.
      if (nodes.length > 0 && listed.unreachableNodes.includes(nodes[0]!)) throw silentNode(nodes[0]!);
      call.sendMetadata(listCoverageHeaders(listed.unreachableNodes));
      const matching = listed.snapshots.filter(
        (snapshot) =>
          (!request.snapshot_id || snapshot.snapshotId === request.snapshot_id) &&
          (!request.source_volume_id || snapshot.sourceVolumeId === request.source_volume_id) &&
          (!token || snapshot.snapshotId > token),
      );
      const limit = request.max_entries > 0 ? Math.min(request.max_entries, MAX_SNAPSHOT_PAGE) : MAX_SNAPSHOT_PAGE;
      const page = matching.slice(0, limit);
      const more = matching.length > page.length;
      return {
        entries: page.map((snapshot) => ({ snapshot: toCsiSnapshot(snapshot) })),
        next_token: more ? page[page.length - 1]!.snapshotId : '',
      };
    },
  };
}

/** Ready: a listed snapshot is on its pool, and a create answers only once its copy is recorded there. */
function toCsiSnapshot(snapshot: Omit<ListedSnapshot, 'nodeId' | 'name'>): Snapshot {
  const millis = Date.parse(snapshot.createdAt);
  const at = Number.isNaN(millis) ? 0 : millis;
  return {
    snapshot_id: snapshot.snapshotId,
    source_volume_id: snapshot.sourceVolumeId,
    size_bytes: String(snapshot.sizeBytes),
    creation_time: { seconds: String(Math.floor(at / 1000)), nanos: (at % 1000) * 1_000_000 },
    ready_to_use: true,
  };
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
