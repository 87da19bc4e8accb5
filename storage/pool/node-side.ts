/**
 * What the pool asks of the node side (storage/node/): the CSI node calls on a volume the pool holds, restaging
 * at open, and whether a volume is in use, which refuses its delete. The pool defines the questions and the node
 * side answers them (storage/node/node-volumes.ts); each backend hands PoolBackend the answers for its own
 * volume access, so the pool never imports the node side.
 */
import type { OpenReport, PublishOptions, StageOptions, VolumeStats } from './backend';
import type { StoredRecord } from './records';

/** A volume as the node side needs to know it; a key alone (a directory left without a record) is enough. */
export type NodeVolume = Pick<StoredRecord, 'key' | 'accessType' | 'fsType'>;

export interface NodeSide {
  /** StorageBackend.stageVolume on an existing volume. */
  stage(volume: NodeVolume, stagingPath: string, options: StageOptions): Promise<void>;
  /** StorageBackend.unstageVolume on an existing volume. */
  unstage(volume: NodeVolume, stagingPath: string): Promise<void>;
  /** StorageBackend.publishVolume on an existing volume. */
  publish(volume: NodeVolume, stagingPath: string, targetPath: string, options: PublishOptions): Promise<void>;
  /** StorageBackend.unpublishVolume on an existing volume. */
  unpublish(volume: NodeVolume, targetPath: string): Promise<void>;
  /** StorageBackend.volumeStats; `dataPath` is the volume's data in the pool (its directory or image file). */
  stats(volume: NodeVolume, dataPath: string, volumePath: string): Promise<VolumeStats>;
  /** At open: re-establishes every recorded staging; stagings without a record come back as strays. */
  restageAll(): Promise<{ repaired: OpenReport['repaired']; strays: string[] }>;
  /** FailedPrecondition while the volume is staged or mounted anywhere: deleting it then would lose data. */
  assertNotInUse(volume: NodeVolume): Promise<void>;
}
