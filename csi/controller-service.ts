import { Metadata, type ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import type { NodeView } from '../common/names';
import { isListPosition } from '../common/list-position';
import type { VolumeOperations } from '../operations/volume-operations';
import { formatBytes } from '../common/quantity';
import type { DeleteVolumeResult } from '../workflows/node-work';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
import type { CreateVolumeResponse } from './generated/csi/v1/CreateVolumeResponse';
import type { DeleteVolumeRequest__Output } from './generated/csi/v1/DeleteVolumeRequest';
import type { GetCapacityRequest__Output } from './generated/csi/v1/GetCapacityRequest';
import type { GetCapacityResponse } from './generated/csi/v1/GetCapacityResponse';
import type { ListVolumesRequest__Output } from './generated/csi/v1/ListVolumesRequest';
import type { ListVolumesResponse } from './generated/csi/v1/ListVolumesResponse';
import { assertMaxEntries, listCoverageHeaders, unusableToken } from './list-coverage';
import { validateVolumeCapabilities } from './controller-validate';
import { controllerHealthHandlers, HEALTH_CAPABILITIES } from './controller-health';
import type { ControllerExpandVolumeRequest__Output } from './generated/csi/v1/ControllerExpandVolumeRequest';
import type { ControllerExpandVolumeResponse } from './generated/csi/v1/ControllerExpandVolumeResponse';
import type { ValidateVolumeCapabilitiesRequest__Output } from './generated/csi/v1/ValidateVolumeCapabilitiesRequest';
import type { AsyncService } from './server';
import {
  checkCapabilities,
  checkParameters,
  nodeTopology,
  nodesOfTopologies,
  toBytes,
  validateCreate,
  type CreateLimits,
} from './validate-create';

export interface ControllerOptions extends CreateLimits {
  driverName: string;
  /** The longest a CSI call waits for its workflow before answering ABORTED (retriable). */
  callWaitMs: number;
}

const CAPABILITIES = ['CREATE_DELETE_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'EXPAND_VOLUME'];
const SNAPSHOT_CAPABILITIES = ['CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS', 'GET_SNAPSHOT', 'CLONE_VOLUME'];

/**
 * The CSI controller: validates each call, runs it as its operation (operations/volume-operations.ts) within the
 * call's wait, and answers. `snapshotHandlers` (csi/controller-snapshots.ts): given with --snapshots, which adds the
 * snapshot calls and capabilities (docs/snapshots.md).
 */
export function createControllerService(
  operations: VolumeOperations,
  options: ControllerOptions,
  snapshotHandlers?: AsyncService,
) {
  const capabilities = [...CAPABILITIES, ...HEALTH_CAPABILITIES, ...(snapshotHandlers ? SNAPSHOT_CAPABILITIES : [])];
  const snapshots = snapshotHandlers !== undefined;
  return {
    ...snapshotHandlers,
    ...controllerHealthHandlers(operations),

    async ControllerGetCapabilities() {
      return { capabilities: capabilities.map((type) => ({ rpc: { type } })) };
    },

    async CreateVolume(
      request: CreateVolumeRequest__Output,
      call: ServerUnaryCall<unknown, unknown>,
    ): Promise<CreateVolumeResponse> {
      return createVolume(operations, { ...options, snapshots }, request, call);
    },

    async DeleteVolume(request: DeleteVolumeRequest__Output, call: ServerUnaryCall<unknown, unknown>) {
      if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
      return answerDeletion(call, options.callWaitMs, (waitMs) => operations.delete(request.volume_id, waitMs));
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

/** ControllerExpandVolume: validated here, then a durable workflow on the volume's home node. */
async function controllerExpandVolume(
  operations: VolumeOperations,
  options: { maxVolumeBytes: number; callWaitMs: number },
  request: ControllerExpandVolumeRequest__Output,
  call: ServerUnaryCall<unknown, unknown>,
): Promise<ControllerExpandVolumeResponse> {
  if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
  if (!request.capacity_range) throw new DriverError(FailureType.InvalidArgument, 'capacity_range is required');
  const requiredBytes = toBytes(request.capacity_range.required_bytes, 'required_bytes');
  const limitBytes = toBytes(request.capacity_range.limit_bytes, 'limit_bytes');
  if (requiredBytes === 0 && limitBytes === 0) {
    throw new DriverError(FailureType.InvalidArgument, 'capacity_range needs required_bytes or limit_bytes');
  }
  if (limitBytes > 0 && limitBytes < requiredBytes) {
    throw new DriverError(FailureType.InvalidArgument, 'capacity_range: limit_bytes is below required_bytes');
  }
  const target = requiredBytes || limitBytes;
  if (target > options.maxVolumeBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `${formatBytes(target)} exceeds the largest volume this driver creates (${formatBytes(options.maxVolumeBytes)})`,
    );
  }
  const result = await operations.expand(request.volume_id, target, callWaitMs(call, options.callWaitMs));
  if (limitBytes > 0 && result.capacityBytes > limitBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `volume is already ${result.capacityBytes} bytes, above limit_bytes ${limitBytes}; volumes never shrink`,
    );
  }
  const block = request.volume_capability?.block !== undefined && request.volume_capability?.block !== null;
  return {
    capacity_bytes: String(result.capacityBytes),
    node_expansion_required: result.nodeExpansionRequired && !block,
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

/** Answer a second before the caller's deadline so the CO gets our retriable status rather than a timeout. */
const MARGIN_MS = 1000;
const FLOOR_MS = 200;

export function callWaitMs(call: ServerUnaryCall<unknown, unknown>, configuredMs: number): number {
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  if (!Number.isFinite(deadlineMs) || deadlineMs <= 0) return configuredMs;
  return Math.max(FLOOR_MS, Math.min(configuredMs, deadlineMs - Date.now() - MARGIN_MS));
}

/** The caller has given up: it cancelled the call, or its deadline has passed. */
export function callAbandoned(call: ServerUnaryCall<unknown, unknown>): boolean {
  if (call.cancelled) return true;
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  return Number.isFinite(deadlineMs) && deadlineMs > 0 && deadlineMs < Date.now();
}

/**
 * What a successful DeleteVolume found, sent as response headers: the CSI response is empty, and our CLI must
 * be able to say "nothing to delete, and why" instead of "deleted". CSI clients ignore unknown headers.
 */
export const DELETE_OUTCOME_HEADER = 'durable-csi-delete-outcome';
/** For node-forgotten: the operator's reason, URI-encoded (header values are ASCII). */
export const DELETE_REASON_HEADER = 'durable-csi-delete-reason';

/** `never-issued`: the ID is malformed, so no deletion was started. */
export type DeleteOutcome = DeleteVolumeResult['outcome'] | 'never-issued';

/** A deletion of a volume or a snapshot, run within the call's wait; what it found goes back as headers. */
export async function answerDeletion(
  call: ServerUnaryCall<unknown, unknown>,
  configuredWaitMs: number,
  deletion: (waitMs: number) => Promise<DeleteVolumeResult | 'never-issued'>,
): Promise<Record<string, never>> {
  const result = await deletion(callWaitMs(call, configuredWaitMs));
  call.sendMetadata(deleteOutcomeHeaders(result));
  return {};
}

function deleteOutcomeHeaders(result: DeleteVolumeResult | 'never-issued'): Metadata {
  const headers = new Metadata();
  headers.set(DELETE_OUTCOME_HEADER, result === 'never-issued' ? result : result.outcome);
  if (result !== 'never-issued' && result.reason) headers.set(DELETE_REASON_HEADER, encodeURIComponent(result.reason));
  return headers;
}

export function readDeleteOutcome(headers: Metadata): { outcome?: string; reason?: string } {
  const [outcome] = headers.get(DELETE_OUTCOME_HEADER);
  const [reason] = headers.get(DELETE_REASON_HEADER);
  return {
    outcome: typeof outcome === 'string' ? outcome : undefined,
    reason: typeof reason === 'string' ? safeDecode(reason) : undefined,
  };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
