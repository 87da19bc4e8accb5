import { isLoopFsType, LOOP_FS_TYPES, minimumLoopBytes, type AccessType } from '../common/backend-kinds';
import { DriverError, FailureType } from '../common/failures';
import { TOPOLOGY_NODE_KEY, parseSnapshotId, parseVolumeId } from '../common/names';
import { formatBytes } from '../common/quantity';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
import type { Topology__Output } from './generated/csi/v1/Topology';
import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';
import type { VolumeContentSource__Output } from './generated/csi/v1/VolumeContentSource';

/*
 * The checks of CreateVolume's request (and the parts GetCapacity, ValidateVolumeCapabilities and the node's calls
 * share: capabilities, parameters): a precise INVALID_ARGUMENT (or OUT_OF_RANGE, NOT_FOUND) before anything starts.
 */

/** A CreateVolume request checked and reduced to what the workflow needs. Secrets are dropped here. */
export interface ValidCreate {
  name: string;
  capacityBytes: number;
  requiredBytes: number;
  limitBytes: number;
  parameters: Record<string, string>;
  accessType: AccessType;
  /** Undefined: the backend's default (ext4 for loop). */
  fsType?: string;
  requisite?: string[];
  preferred: string[];
  /** Restore or clone (only with --snapshots): the source, and its node, the only one that can serve the request. */
  contentSource?: { snapshotId: string } | { volumeId: string };
}

export const DEFAULT_VOLUME_BYTES = 1024 ** 3;
export const MAX_NAME_LENGTH = 253;

export interface CreateLimits {
  /** The largest volume the driver accepts at all; larger requests are OUT_OF_RANGE. */
  maxVolumeBytes: number;
  /** --snapshots: volume_content_source is served (restore and clone). */
  snapshots?: boolean;
}

export function validateCreate(request: CreateVolumeRequest__Output, limits: CreateLimits): ValidCreate {
  const name = checkName(request.name);
  const accessType = checkCapabilities(request.volume_capabilities);
  const parameters = checkParameters(request.parameters);
  const fsType = accessType === 'mount' ? chooseFsType(request.volume_capabilities, parameters) : undefined;
  if (request.volume_content_source && !limits.snapshots) {
    throw invalid('volume_content_source: this controller serves no snapshots or clones (it runs without --snapshots)');
  }
  const source = request.volume_content_source ? contentSourceOf(request.volume_content_source) : undefined;
  if (Object.keys(request.mutable_parameters ?? {}).length > 0) {
    throw invalid('mutable_parameters: this driver does not support modifying volumes');
  }
  const range = checkCapacity(request.capacity_range, limits);
  const { requiredBytes, limitBytes } = range;
  // Rounded up to what the filesystem can hold at all (xfs: 300 MiB) when the limit allows: CSI lets a volume
  // be larger than required, and the node would otherwise refuse it.
  const minimum = minimumLoopBytes(accessType, fsType);
  const rounded =
    range.capacityBytes < minimum && (limitBytes === 0 || limitBytes >= minimum) ? minimum : range.capacityBytes;
  // From a source without a required size: the node makes it the source's size (as the limit allows).
  const capacityBytes = source && requiredBytes === 0 ? 0 : rounded;
  const topology = request.accessibility_requirements;
  const requisite = topology?.requisite.length ? nodesOfTopologies(topology.requisite, 'requisite') : undefined;
  const preferred = topology?.preferred.length ? nodesOfTopologies(topology.preferred, 'preferred') : [];
  const valid = {
    name,
    capacityBytes,
    requiredBytes,
    limitBytes,
    parameters,
    accessType,
    fsType,
    requisite,
    preferred,
  };
  if (!source) return valid;
  const what = 'snapshotId' in source.contentSource ? 'the snapshot' : 'the source volume';
  return { ...valid, ...placeOnSourceNode(source.nodeId, requisite, what), contentSource: source.contentSource };
}

/** Names become workflow IDs and are stored on nodes (never used as paths); refuse what could confuse either. */
export function checkName(name: string): string {
  if (!name) throw invalid('name is required');
  if (name.length > MAX_NAME_LENGTH) throw invalid(`name is longer than ${MAX_NAME_LENGTH} characters`);
  if (name.includes('/') || name.includes('..')) throw invalid(`name "${name}" must not contain "/" or ".."`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalid('name must not contain NUL or other control characters');
  return name;
}

function checkCapacity(range: CreateVolumeRequest__Output['capacity_range'], limits: CreateLimits) {
  const requiredBytes = toBytes(range?.required_bytes, 'required_bytes');
  // A limit beyond any real size (int64 max is common) means "no limit", not an error.
  const limitBytes = isHuge(range?.limit_bytes) ? 0 : toBytes(range?.limit_bytes, 'limit_bytes');
  if (limitBytes > 0 && limitBytes < requiredBytes) {
    throw invalid(`capacity_range: limit_bytes (${limitBytes}) is below required_bytes (${requiredBytes})`);
  }
  const capacityBytes = requiredBytes > 0 ? requiredBytes : Math.min(DEFAULT_VOLUME_BYTES, limitBytes || Infinity);
  if (capacityBytes > limits.maxVolumeBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `capacity_range: ${formatBytes(capacityBytes)} exceeds the largest volume this driver creates (${formatBytes(limits.maxVolumeBytes)})`,
    );
  }
  return { requiredBytes, limitBytes, capacityBytes };
}

function isHuge(value: string | undefined): boolean {
  return value !== undefined && /^\d+$/.test(value) && !Number.isSafeInteger(Number(value));
}

/** int64 fields arrive as decimal strings (proto-loader longs: String). */
export function toBytes(value: string | undefined, field: string): number {
  if (value === undefined || value === '') return 0;
  if (!/^-?\d+$/.test(value)) throw invalid(`capacity_range.${field} is not an integer`);
  const bytes = Number(value);
  if (bytes < 0) throw invalid(`capacity_range.${field} must not be negative (got ${value})`);
  if (!Number.isSafeInteger(bytes)) {
    throw new DriverError(FailureType.OutOfRange, `capacity_range.${field} ${value} is too large`);
  }
  return bytes;
}

/** Node-local volumes can be used from one node only; multi-node modes are refused, not silently narrowed. */
const SINGLE_NODE_MODES = new Set([
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
]);

/** Checks every capability and returns the access type they agree on. */
export function checkCapabilities(capabilities: VolumeCapability__Output[]): AccessType {
  if (capabilities.length === 0) throw invalid('volume_capabilities is required');
  const types = new Set<AccessType>();
  for (const capability of capabilities) {
    if (capability.block) types.add('block');
    else if (capability.mount) types.add('mount');
    else throw invalid('each volume capability needs an access type (mount or block)');
    const mode = String(capability.access_mode?.mode ?? 'UNKNOWN');
    if (!SINGLE_NODE_MODES.has(mode)) {
      throw invalid(`access mode ${mode} is not supported: node-local volumes allow single-node modes only`);
    }
  }
  if (types.size > 1) throw invalid('volume_capabilities mix block and mount access; ask for one');
  return [...types][0] as AccessType;
}

/** Filesystems a formatting backend (loop) creates; the dir backend ignores the choice. */
export const FS_TYPE_PARAMETER = 'fsType';

/**
 * The filesystem asked for, from the mount capability's fs_type (external-provisioner fills it from the
 * StorageClass's csi.storage.k8s.io/fstype) or the StorageClass parameter fsType. Undefined: the default.
 */
export function chooseFsType(
  capabilities: VolumeCapability__Output[],
  parameters: Record<string, string>,
): string | undefined {
  const asked = new Set<string>();
  for (const capability of capabilities) if (capability.mount?.fs_type) asked.add(capability.mount.fs_type);
  if (parameters[FS_TYPE_PARAMETER]) asked.add(parameters[FS_TYPE_PARAMETER]);
  if (asked.size > 1) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `conflicting filesystem types asked for: ${[...asked].join(', ')}`,
    );
  }
  const [fsType] = [...asked];
  if (fsType !== undefined && !isLoopFsType(fsType)) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `filesystem "${fsType}" is not supported; use ${LOOP_FS_TYPES.join(' or ')}`,
    );
  }
  return fsType;
}

/**
 * StorageClass parameters the driver understands. external-provisioner adds the csi.storage.k8s.io/pv/* and
 * pvc/* keys with --extra-create-metadata; they are accepted and kept for the record. It strips
 * csi.storage.k8s.io/fstype from CreateVolume (it becomes the capability's fs_type) but passes the class's
 * parameters unchanged to GetCapacity, so that key is accepted too (the Kubernetes e2e found it).
 */
const KNOWN_PARAMETERS = new Set<string>([FS_TYPE_PARAMETER]);
const PROVISIONER_METADATA = /^csi\.storage\.k8s\.io\/((pv|pvc)\/(name|namespace)|fstype)$/;

export function checkParameters(parameters: Record<string, string>): Record<string, string> {
  const unknown = Object.keys(parameters).filter(
    (key) => !KNOWN_PARAMETERS.has(key) && !PROVISIONER_METADATA.test(key),
  );
  if (unknown.length > 0) {
    const supported = KNOWN_PARAMETERS.size ? [...KNOWN_PARAMETERS].join(', ') : 'none yet';
    throw new DriverError(
      FailureType.InvalidArgument,
      `unknown parameter(s) ${unknown.join(', ')}; supported StorageClass parameters: ${supported}`,
    );
  }
  return { ...parameters };
}

/**
 * A CreateVolume's content source, checked: an ID this driver could not have issued is NOT_FOUND (CSI: the source
 * does not exist). The node named by the ID is the only one that can serve the request.
 */
export function contentSourceOf(source: VolumeContentSource__Output): {
  contentSource: { snapshotId: string } | { volumeId: string };
  nodeId: string;
} {
  if (source.snapshot) {
    const id = source.snapshot.snapshot_id;
    const parts = parseSnapshotId(id);
    if (!parts)
      throw new DriverError(FailureType.NotFound, `snapshot ${JSON.stringify(id)} was not issued by this driver`);
    return { contentSource: { snapshotId: id }, nodeId: parts.nodeId };
  }
  if (source.volume) {
    const id = source.volume.volume_id;
    const parts = parseVolumeId(id);
    if (!parts)
      throw new DriverError(FailureType.NotFound, `volume ${JSON.stringify(id)} was not issued by this driver`);
    return { contentSource: { volumeId: id }, nodeId: parts.nodeId };
  }
  throw invalid('volume_content_source names neither a snapshot nor a volume');
}

/**
 * The source's node is the only place the copy can be made. A requisite topology that leaves it out cannot be
 * served: RESOURCE_EXHAUSTED, CSI's code for "cannot be provisioned in accessible_topology" (docs/design.md).
 */
export function placeOnSourceNode(
  nodeId: string,
  requisite: string[] | undefined,
  what: string,
): { requisite: string[]; preferred: string[] } {
  if (requisite && !requisite.includes(nodeId)) {
    throw new DriverError(
      FailureType.ResourceExhausted,
      `${what} is on node ${nodeId}, and a volume made from it can only be made there; the requisite topology ` +
        `allows only ${requisite.join(', ')}`,
    );
  }
  return { requisite: [nodeId], preferred: [nodeId] };
}

/** Our only topology key is the node; any other key means the request was meant for another driver. */
export function nodesOfTopologies(topologies: Topology__Output[], field: string): string[] {
  return topologies.map((topology) => {
    const keys = Object.keys(topology.segments);
    const nodeId = topology.segments[TOPOLOGY_NODE_KEY];
    if (keys.length !== 1 || !nodeId) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `accessibility_requirements.${field}: each topology must have exactly the key ${TOPOLOGY_NODE_KEY} (got ${keys.join(', ') || 'none'})`,
      );
    }
    return nodeId;
  });
}

export function nodeTopology(nodeId: string) {
  return { segments: { [TOPOLOGY_NODE_KEY]: nodeId } };
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
