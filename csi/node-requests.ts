/**
 * Checks shared by the Node RPCs. Everything here runs before any side effect: bad input is INVALID_ARGUMENT,
 * and a volume ID that cannot name a volume of this node's pool is NOT_FOUND.
 */
import path from 'node:path';
import { DriverError, FailureType } from '../common/failures';
import { ownsVolume, parseVolumeId } from '../common/names';
import type { StageOptions, StorageBackend } from '../storage/pool/backend';
import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';
import { assertInKubeletDir } from './kubelet-paths';
import { refuseMountOption } from './mount-options';
import { checkCapabilities } from './validate-create';

export interface NodeContext {
  nodeId: string;
  /** The identity of the pool this agent opened (volume IDs carry its prefix); throws UNAVAILABLE until it is open. */
  poolId: () => string;
  /** Why the pool gate refused the pool (agent/pool-gate.ts), while it does; undefined otherwise. */
  poolRefusal: () => string | undefined;
  backend: StorageBackend;
  /** `--kubelet-dir`: every staging and target path must resolve inside it (csi/kubelet-paths.ts). */
  kubeletDir: string;
}

export function required(value: string, field: string): string {
  if (!value) throw invalid(`${field} is required`);
  return value;
}

/** CO paths must be absolute (CSI) and inside the kubelet directory; they are only ever used as mount targets. */
export async function requiredPath(value: string, field: string, context: NodeContext): Promise<string> {
  required(value, field);
  if (!path.isAbsolute(value) || value.includes('\0')) throw invalid(`${field} must be an absolute path`);
  await assertInKubeletDir(value, field, context.kubeletDir);
  return value;
}

/** One capability, single-node modes only, and an access type this backend serves. */
export function stageOptions(capability: VolumeCapability__Output | null, backend: StorageBackend): StageOptions {
  if (!capability) throw invalid('volume_capability is required');
  const accessType = checkCapabilities([capability]);
  if (!backend.capabilities.accessTypes.includes(accessType)) {
    throw invalid(`${accessType} access is not supported by the ${backend.kind} backend of this node`);
  }
  const mountFlags = capability.mount?.mount_flags ?? [];
  for (const flag of mountFlags) {
    // eslint-disable-next-line no-control-regex
    if (flag === '' || flag.includes(',') || /[\u0000-\u001f\u007f]/.test(flag)) {
      throw invalid(`mount flag ${JSON.stringify(flag)} is not a single mount option`);
    }
    const refusal = refuseMountOption(flag, backend.kind === 'dir');
    if (refusal) throw invalid(refusal);
  }
  return { accessType, fsType: capability.mount?.fs_type ?? '', mountFlags };
}

/** The volume's key in this node's pool; NOT_FOUND when the ID names another node, another pool or nothing. */
export function volumeKey(volumeId: string, context: NodeContext): string {
  const parts = parseVolumeId(volumeId);
  if (!parts) throw notFound(`volume ${volumeId} was not issued by this driver`);
  if (parts.nodeId !== context.nodeId) {
    throw notFound(`volume ${volumeId} lives on node ${parts.nodeId}, not on ${context.nodeId}`);
  }
  if (!ownsVolume(context.poolId(), parts.poolIdPrefix)) {
    throw notFound(`volume ${volumeId} was issued on a pool this node no longer has`);
  }
  return parts.key;
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}

function notFound(message: string): DriverError {
  return new DriverError(FailureType.NotFound, message);
}
