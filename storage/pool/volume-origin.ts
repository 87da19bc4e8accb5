/**
 * Restores and clones: the content source a create names (a snapshot or another volume of the pool), checked
 * against what the create asks for before anything is touched, and the filesystem the new volume keeps.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { CreateVolumeSpec } from './backend';
import type { PoolLayout } from './pool-layout';
import { readSnapshot } from './snapshots';
import { describeSize } from './volume-compat';
import type { VolumeShape } from './volume-compat';
import { readRecord, describeSource } from './records';
import type { StoredRecord } from './records';

/**
 * Where a restored or cloned volume's data comes from: `path` is the snapshot's copy or the source volume's data;
 * `volume` is set for a clone (a volume the node may have staged: loop freezes its filesystem while copying).
 */
export interface CopyOrigin {
  path: string;
  volume?: StoredRecord;
  /** The source's size (a snapshot's, a volume's capacity): what the copy's time budget is derived from. */
  sizeBytes: number;
}

/** The shape a restore or clone must match: the source's access type and filesystem. */
type SourceShape = Pick<StoredRecord, 'accessType' | 'fsType'>;

/** Where a pool's data lies: VolumeRecord.path and SnapshotRecord.path of a key. */
export interface DataPaths {
  dataPath(key: string): string;
  snapshotDataPath(key: string): string;
}

/**
 * The source of a restore or clone: NotFound when the pool does not hold it, OutOfRange when the requested
 * capacity is below its size, InvalidArgument when the request's access type or filesystem differ from its own
 * (an fsType left empty takes the source's).
 */
export async function originOf(
  layout: PoolLayout,
  paths: DataPaths,
  spec: CreateVolumeSpec,
  requested: VolumeShape,
): Promise<{ copy: CopyOrigin; shape: VolumeShape }> {
  const source = spec.contentSource!;
  let copy: CopyOrigin;
  let sizeBytes: number;
  let own: SourceShape;
  if ('snapshotKey' in source) {
    const snapshot = await readSnapshot(layout, source.snapshotKey);
    if (!snapshot) {
      throw new DriverError(
        FailureType.NotFound,
        `snapshot ${source.snapshotKey} does not exist in pool ${layout.root}`,
      );
    }
    ({ sizeBytes } = snapshot);
    copy = { path: paths.snapshotDataPath(snapshot.key), sizeBytes };
    own = snapshot;
  } else {
    const volume = await readRecord(layout, source.volumeKey);
    if (!volume) {
      throw new DriverError(
        FailureType.NotFound,
        `volume ${source.volumeKey} (the source to clone) does not exist in pool ${layout.root}`,
      );
    }
    sizeBytes = volume.capacityBytes;
    copy = { path: paths.dataPath(volume.key), volume, sizeBytes };
    own = volume;
  }
  if (spec.capacityBytes < sizeBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `volume "${spec.name}" asks for ${describeSize(spec.capacityBytes)}, less than the ` +
        `${describeSize(sizeBytes)} of its source (${describeSource(source)}); ask for at least that much`,
    );
  }
  const shape = adoptFsType(requested, spec, own);
  for (const field of ['accessType', 'fsType'] as const) {
    if ((shape[field] ?? 'none') !== (own[field] ?? 'none')) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `${describeSource(source)} holds ${field} ${own[field] ?? 'none'}; volume "${spec.name}" asks for ` +
          `${shape[field] ?? 'none'}, and a restore or clone keeps its source's`,
      );
    }
  }
  return { copy, shape };
}

/**
 * A restore or clone that names no fsType takes its source's filesystem (an existing volume's, on a retry) rather
 * than the backend's default; only on backends that format (the requested shape has an fsType).
 */
export function adoptFsType(requested: VolumeShape, spec: CreateVolumeSpec, source: SourceShape): VolumeShape {
  if (!spec.contentSource || spec.fsType || requested.fsType === undefined || source.fsType === undefined) {
    return requested;
  }
  return { ...requested, fsType: source.fsType };
}
