import type { ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import type { NodeView } from '../common/names';
import { isListPosition } from '../common/list-position';
import type { VolumeOperations } from '../operations/volume-operations';
import type { SnapshotOperations } from '../operations/snapshot-operations';
import { SNAPSHOT_CAPABILITIES, createSnapshotHandlers } from './controller-snapshots';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
import type { CreateVolumeResponse } from './generated/csi/v1/CreateVolumeResponse';
import type { DeleteVolumeRequest__Output } from './generated/csi/v1/DeleteVolumeRequest';
import type { GetCapacityRequest__Output } from './generated/csi/v1/GetCapacityRequest';
import type { GetCapacityResponse } from './generated/csi/v1/GetCapacityResponse';
import type { ListVolumesRequest__Output } from './generated/csi/v1/ListVolumesRequest';
import type { ListVolumesResponse } from './generated/csi/v1/ListVolumesResponse';
import { callAbandoned, callWaitMs } from './call-wait';
import { controllerExpandVolume } from './controller-expand';
import { deleteOutcomeHeaders } from './delete-outcome';
import { assertMaxEntries, listCoverageHeaders, unusableToken } from './list-coverage';
import { validateVolumeCapabilities } from './controller-validate';
import type { ControllerExpandVolumeRequest__Output } from './generated/csi/v1/ControllerExpandVolumeRequest';
import type { ControllerExpandVolumeResponse } from './generated/csi/v1/ControllerExpandVolumeResponse';
import type { ValidateVolumeCapabilitiesRequest__Output } from './generated/csi/v1/ValidateVolumeCapabilitiesRequest';
import { nodeTopology, nodesOfTopologies } from './topology';
import { checkCapabilities } from './validate-capabilities';
import { validateCreate, type CreateLimits } from './validate-create';
import { checkParameters } from './validate-parameters';

export interface ControllerOptions extends CreateLimits {
  driverName: string;
  /** The longest a CSI call waits for its workflow before answering ABORTED (retriable). */
  callWaitMs: number;
}

const CAPABILITIES = ['CREATE_DELETE_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'EXPAND_VOLUME'];

/** `snapshots`: given with --snapshots, which adds the snapshot calls and capabilities (docs/snapshots.md). */
export function createControllerService(
  operations: VolumeOperations,
  options: ControllerOptions,
  snapshots?: SnapshotOperations,
) {
  const capabilities = snapshots ? [...CAPABILITIES, ...SNAPSHOT_CAPABILITIES] : CAPABILITIES;
  return {
    ...(snapshots ? createSnapshotHandlers(snapshots, options) : {}),

    async ControllerGetCapabilities() {
      return { capabilities: capabilities.map((type) => ({ rpc: { type } })) };
    },

    async CreateVolume(
      request: CreateVolumeRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<CreateVolumeResponse> {
      return createVolume(operations, { ...options, snapshots: snapshots !== undefined }, request, call);
    },

    async DeleteVolume(request: DeleteVolumeRequest__Output, call: ServerUnaryCall<unknown, unknown>) {
      if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
      const result = await operations.delete(request.volume_id, callWaitMs(call, options.callWaitMs));
      call.sendMetadata(deleteOutcomeHeaders(result));
      return {};
    },

    async ControllerExpandVolume(
      request: ControllerExpandVolumeRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<ControllerExpandVolumeResponse> {
      return controllerExpandVolume(operations, options, request, call);
    },

    async ValidateVolumeCapabilities(request: ValidateVolumeCapabilitiesRequest__Output) {
      return validateVolumeCapabilities(operations, request);
    },

    async ListVolumes(
      request: ListVolumesRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<ListVolumesResponse> {
      return listVolumes(operations, request, call);
    },

    async GetCapacity(request: GetCapacityRequest__Output): Promise<GetCapacityResponse> {
      return getCapacity(operations, options, request);
    },
  };
}

async function createVolume(
  operations: VolumeOperations,
  options: ControllerOptions & { snapshots: boolean },
  request: CreateVolumeRequest__Output,
  call: ServerUnaryCall<unknown, unknown>,
): Promise<CreateVolumeResponse> {
  const receivedAt = new Date();
  const valid = validateCreate(request, options);
  const result = await operations.create(
    {
      driverName: options.driverName,
      name: valid.name,
      capacityBytes: valid.capacityBytes,
      parameters: valid.parameters,
      accessType: valid.accessType,
      fsType: valid.fsType,
      requisite: valid.requisite,
      preferred: valid.preferred,
      ...(valid.contentSource ? { contentSource: valid.contentSource, limitBytes: valid.limitBytes } : {}),
    },
    { requiredBytes: valid.requiredBytes, limitBytes: valid.limitBytes },
    callWaitMs(call, options.callWaitMs),
    { receivedAt, abandoned: () => callAbandoned(call) },
  );
  return {
    volume: {
      volume_id: result.volumeId,
      capacity_bytes: String(result.capacityBytes),
      volume_context: {},
      accessible_topology: [nodeTopology(result.nodeId)],
      ...(valid.contentSource ? { content_source: toContentSource(valid.contentSource) } : {}),
    },
  };
}

async function listVolumes(
  operations: VolumeOperations,
  request: ListVolumesRequest__Output,
  call: ServerUnaryCall<unknown, unknown>,
): Promise<ListVolumesResponse> {
  assertMaxEntries(request.max_entries);
  const token = request.starting_token;
  if (!isListPosition(token)) throw unusableToken(token);
  // One bounded page per call (at most 1,000 entries, also when max_entries is 0 or larger), read from the pools.
  const page = await operations.listPage(token, request.max_entries);
  call.sendMetadata(listCoverageHeaders(page.unreachableNodes));
  return {
    entries: page.volumes.map((volume) => ({
      volume: {
        volume_id: volume.volumeId,
        capacity_bytes: String(volume.capacityBytes),
        accessible_topology: [nodeTopology(volume.nodeId)],
      },
    })),
    next_token: page.nextToken,
  };
}

async function getCapacity(
  operations: VolumeOperations,
  options: ControllerOptions,
  request: GetCapacityRequest__Output,
): Promise<GetCapacityResponse> {
  checkParameters(request.parameters);
  if (request.volume_capabilities.length > 0) checkCapabilities(request.volume_capabilities);
  const segment = request.accessible_topology
    ? nodesOfTopologies([request.accessible_topology], 'topology')
    : undefined;
  // A segment (what external-provisioner asks, per node) reads only its nodes' records; no topology sums all.
  const counted = await operations.capacityNodes(segment);
  const available = counted.map(availableOf);
  return {
    available_capacity: String(available.reduce((sum, bytes) => sum + bytes, 0)),
    maximum_volume_size: { value: String(Math.min(options.maxVolumeBytes, Math.max(0, ...available))) },
  };
}

/** A node that is not live can take no new volume: its capacity counts as zero. */
function availableOf(node: NodeView): number {
  return node.live ? node.availableBytes : 0;
}

function toContentSource(source: { snapshotId: string } | { volumeId: string }) {
  return 'snapshotId' in source
    ? { snapshot: { snapshot_id: source.snapshotId } }
    : { volume: { volume_id: source.volumeId } };
}
