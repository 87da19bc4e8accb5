import { DriverError, FailureType } from '../common/failures';
import { formatBytes } from '../common/quantity';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
import { checkCapabilities, type AccessType } from './validate-capabilities';
import { checkParameters } from './validate-parameters';
import { chooseFsType } from './fs-type';
import { minimumLoopBytes } from '../storage/loop/filesystems';
import { nodesOfTopologies } from './topology';

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
}

export const DEFAULT_VOLUME_BYTES = 1024 ** 3;
export const MAX_NAME_LENGTH = 253;

export interface CreateLimits {
  /** The largest volume the driver accepts at all; larger requests are OUT_OF_RANGE. */
  maxVolumeBytes: number;
}

export function validateCreate(request: CreateVolumeRequest__Output, limits: CreateLimits): ValidCreate {
  const name = checkName(request.name);
  const accessType = checkCapabilities(request.volume_capabilities);
  const parameters = checkParameters(request.parameters);
  const fsType = accessType === 'mount' ? chooseFsType(request.volume_capabilities, parameters) : undefined;
  if (request.volume_content_source) {
    throw invalid('volume_content_source: this driver cannot create a volume from a snapshot or another volume');
  }
  if (Object.keys(request.mutable_parameters ?? {}).length > 0) {
    throw invalid('mutable_parameters: this driver does not support modifying volumes');
  }
  const range = checkCapacity(request.capacity_range, limits);
  const { requiredBytes, limitBytes } = range;
  // Rounded up to what the filesystem can hold at all (xfs: 300 MiB) when the limit allows: CSI lets a volume
  // be larger than required, and the node would otherwise refuse it.
  const minimum = minimumLoopBytes(accessType, fsType);
  const capacityBytes =
    range.capacityBytes < minimum && (limitBytes === 0 || limitBytes >= minimum) ? minimum : range.capacityBytes;
  const topology = request.accessibility_requirements;
  const requisite = topology?.requisite.length ? nodesOfTopologies(topology.requisite, 'requisite') : undefined;
  const preferred = topology?.preferred.length ? nodesOfTopologies(topology.preferred, 'preferred') : [];
  return { name, capacityBytes, requiredBytes, limitBytes, parameters, accessType, fsType, requisite, preferred };
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
