import { DriverError } from '../common/failures';
import { parseSnapshotId, parseVolumeId, type SnapshotIdParts, type VolumeIdParts } from '../common/names';
import { checkName } from '../csi/validate-create';

/**
 * What `durable-csi snapshots` refuses before it starts anything. CSI answers DeleteSnapshot of an ID the driver
 * could not have issued with OK (nothing to delete); an operator who typed it deserves to hear it is wrong.
 */
export function checkSourceVolumeId(volumeId: string | undefined): VolumeIdParts {
  if (!volumeId) throw new Error('--source: a volume ID is required');
  const parts = parseVolumeId(volumeId);
  if (!parts) {
    throw new Error(`--source: "${volumeId}" is not a volume ID this driver issues (v1_<node>_<pool>_<key>)`);
  }
  return parts;
}

export function checkSnapshotId(snapshotId: string): SnapshotIdParts {
  if (!snapshotId) throw new Error('a snapshot ID is required');
  const parts = parseSnapshotId(snapshotId);
  if (!parts) {
    throw new Error(`"${snapshotId}" is not a snapshot ID this driver issues (s1_<node>_<pool>_<key>)`);
  }
  return parts;
}

/** The CSI name rules CreateSnapshot applies, so a name the controller would refuse is refused here. */
export function checkSnapshotName(name: string | undefined): string {
  try {
    return checkName(name ?? '');
  } catch (error) {
    if (error instanceof DriverError) throw new Error(`--name: ${error.message}`);
    throw error;
  }
}
