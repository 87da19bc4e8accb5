import { DriverError, FailureType } from '../common/failures';
import { LOOP_FS_TYPES } from '../storage/loop/filesystems';
import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';

/** Filesystems a formatting backend (loop) creates; the dir backend ignores the choice. */
const FS_TYPES = LOOP_FS_TYPES;
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
  if (fsType !== undefined && !(FS_TYPES as readonly string[]).includes(fsType)) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `filesystem "${fsType}" is not supported; use ${FS_TYPES.join(' or ')}`,
    );
  }
  return fsType;
}
