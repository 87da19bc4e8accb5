/**
 * CreateSnapshot, DeleteSnapshot, ListSnapshots and GetSnapshot (docs/snapshots.md), and the content source of
 * CreateVolume.
 * Served only when the controller runs with --snapshots: until then the capabilities are not advertised and the
 * calls are UNIMPLEMENTED, as before.
 */
import type { ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import { isListPosition } from '../common/list-position';
import { silentNode, snapshotLookup } from '../operations/snapshot-operations';
import type { SnapshotOperations } from '../operations/snapshot-operations';
import type { ListedSnapshot } from '../workflows/listing';
import { answerDeletion, callAbandoned, callWaitMs } from './controller-service';
import type { CreateSnapshotRequest__Output } from './generated/csi/v1/CreateSnapshotRequest';
import type { CreateSnapshotResponse } from './generated/csi/v1/CreateSnapshotResponse';
import type { DeleteSnapshotRequest__Output } from './generated/csi/v1/DeleteSnapshotRequest';
import type { GetSnapshotRequest__Output } from './generated/csi/v1/GetSnapshotRequest';
import type { GetSnapshotResponse } from './generated/csi/v1/GetSnapshotResponse';
import type { ListSnapshotsRequest__Output } from './generated/csi/v1/ListSnapshotsRequest';
import type { ListSnapshotsResponse } from './generated/csi/v1/ListSnapshotsResponse';
import type { Snapshot } from './generated/csi/v1/Snapshot';
import { assertMaxEntries, listCoverageHeaders, unusableToken } from './list-coverage';
import { checkName } from './validate-create';

export function createSnapshotHandlers(snapshots: SnapshotOperations, options: { callWaitMs: number }) {
  return {
    async CreateSnapshot(
      request: CreateSnapshotRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<CreateSnapshotResponse> {
      const receivedAt = new Date();
      const name = checkName(request.name);
      if (!request.source_volume_id) throw invalid('source_volume_id is required');
      checkSnapshotParameters(request.parameters, 'snapshots');
      const result = await snapshots.create(name, request.source_volume_id, callWaitMs(call, options.callWaitMs), {
        receivedAt,
        abandoned: () => callAbandoned(call),
      });
      return { snapshot: toCsiSnapshot(result) };
    },

    async DeleteSnapshot(request: DeleteSnapshotRequest__Output, call: ServerUnaryCall<unknown, unknown>) {
      if (!request.snapshot_id) throw invalid('snapshot_id is required');
      return answerDeletion(call, options.callWaitMs, (waitMs) => snapshots.delete(request.snapshot_id, waitMs));
    },

    async ListSnapshots(
      request: ListSnapshotsRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<ListSnapshotsResponse> {
      assertMaxEntries(request.max_entries);
      const token = request.starting_token;
      // A token is a list position of snapshots: the last snapshot ID of the previous page, or past a node's.
      if (!isListPosition(token, 's1')) throw unusableToken(token);
      const lookup = snapshotLookup({ snapshotId: request.snapshot_id, sourceVolumeId: request.source_volume_id });
      // An ID this driver could not have issued names no snapshot: the list is empty (CSI), and no node is asked.
      if (lookup === 'nothing') return { entries: [] };
      // One bounded page per call (at most 1,000 entries, also when max_entries is 0 or larger), read from the pools.
      const page = await snapshots.listPage(token, request.max_entries, lookup);
      // A lookup names one node: its silence is no "no such snapshot", only its pool knows. A node forgotten for good
      // is not asked, and its snapshots are listed as none (CSI's answer for a snapshot that does not exist).
      if (lookup && page.unreachableNodes.includes(lookup.nodeId)) throw silentNode(lookup.nodeId);
      call.sendMetadata(listCoverageHeaders(page.unreachableNodes));
      return {
        entries: page.snapshots.map((snapshot) => ({ snapshot: toCsiSnapshot(snapshot) })),
        next_token: page.nextToken,
      };
    },

    /**
     * ListSnapshots by snapshot_id, one snapshot or NOT_FOUND: the same lookup, asking only the snapshot's node, with
     * the same truth rules. The node's silence is UNAVAILABLE, never NOT_FOUND; an ID this driver could not have
     * issued is NOT_FOUND (the spec's one error for GetSnapshot), and no node is asked; so is a snapshot whose node
     * was forgotten for good, naming the node and the reason.
     */
    async GetSnapshot(request: GetSnapshotRequest__Output): Promise<GetSnapshotResponse> {
      const snapshotId = request.snapshot_id;
      if (!snapshotId) throw invalid('snapshot_id is required');
      const lookup = snapshotLookup({ snapshotId });
      if (!lookup || lookup === 'nothing') {
        throw new DriverError(
          FailureType.NotFound,
          `snapshot ${snapshotId.slice(0, 140)} was not issued by this driver (its snapshot IDs read s1_<node>_...); ` +
            "check the VolumeSnapshotContent's snapshotHandle",
        );
      }
      // A lookup by key matches at most one snapshot: one entry is the whole answer.
      const page = await snapshots.listPage('', 1, lookup);
      if (page.forgotten) {
        throw new DriverError(
          FailureType.NotFound,
          `snapshot ${snapshotId} was on node ${lookup.nodeId}, forgotten for good (${page.forgotten.reason})`,
        );
      }
      if (page.unreachableNodes.includes(lookup.nodeId)) throw silentNode(lookup.nodeId);
      const found = page.snapshots.find((snapshot) => snapshot.snapshotId === snapshotId);
      if (!found) {
        throw new DriverError(
          FailureType.NotFound,
          `snapshot ${snapshotId} is not in node ${lookup.nodeId}'s pool: it was deleted (or its pool replaced)`,
        );
      }
      return { snapshot: toCsiSnapshot(found) };
    },
  };
}

/**
 * A snapshot or group snapshot takes no parameters, but for `deletionPolicy`: Kubernetes' storage suite (v1.37)
 * writes each VolumeSnapshotClass's and VolumeGroupSnapshotClass's deletion policy into its parameters too, which
 * csi-snapshotter passes on, and refused, every group of such a class failed for good. It is the class's to act on
 * (csi-snapshotter deletes or keeps the content), not the driver's: Delete or Retain is taken and ignored. Anything
 * else is INVALID_ARGUMENT, before anything starts.
 */
export function checkSnapshotParameters(
  parameters: Record<string, string> | undefined,
  what: 'snapshots' | 'group snapshots',
): void {
  const unknown = Object.keys(parameters ?? {}).filter((key) => key !== 'deletionPolicy');
  if (unknown.length > 0)
    throw invalid(`parameters: this driver takes none for ${what} but deletionPolicy (got ${unknown.join(', ')})`);
  const policy = parameters?.deletionPolicy;
  if (policy !== undefined && policy !== 'Delete' && policy !== 'Retain') {
    throw invalid(
      `parameters.deletionPolicy: "${policy.slice(0, 64)}" is neither Delete nor Retain (the class's own ` +
        'deletionPolicy decides whether a deletion removes the copies; this driver ignores the parameter)',
    );
  }
}

/**
 * Ready: a listed snapshot is on its pool, and a create answers only once its copy is recorded there. A member of a
 * group snapshot names its group: CSI's sign that it is deleted with the group only.
 */
export function toCsiSnapshot(snapshot: Omit<ListedSnapshot, 'nodeId' | 'name'>): Snapshot {
  const millis = Date.parse(snapshot.createdAt);
  const at = Number.isNaN(millis) ? 0 : millis;
  return {
    snapshot_id: snapshot.snapshotId,
    source_volume_id: snapshot.sourceVolumeId,
    size_bytes: String(snapshot.sizeBytes),
    creation_time: { seconds: String(Math.floor(at / 1000)), nanos: (at % 1000) * 1_000_000 },
    ready_to_use: true,
    ...(snapshot.groupSnapshotId === undefined ? {} : { group_snapshot_id: snapshot.groupSnapshotId }),
  };
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
