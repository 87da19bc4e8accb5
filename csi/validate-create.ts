import { DriverError, FailureType } from '../common/failures';
import { formatBytes } from '../common/quantity';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
import { checkCapabilities, type AccessType } from './validate-capabilities';
import { checkParameters } from './validate-parameters';
import { chooseFsType } from './fs-type';
import { minimumLoopBytes } from '../storage/loop/filesystems';
import { nodesOfTopologies } from './topology';
import { contentSourceOf, placeOnSourceNode } from './content-source';

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

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
