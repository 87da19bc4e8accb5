/** The node side of a pool's volumes, as PoolBackend asks for it (storage/pool/node-side.ts), over a backend's access. */
import type { NodeSide } from '../pool/node-side';
import { publish, unpublish } from './publishing';
import { assertNotInUse, restageAll, stage, unstage } from './staging';
import type { VolumeAccess } from './volume-access';
import { volumeStats } from './volume-stats';

export function nodeVolumes(access: VolumeAccess): NodeSide {
  return {
    stage: (volume, stagingPath, options) => stage(access, volume, stagingPath, options),
    unstage: (volume, stagingPath) => unstage(access, volume, stagingPath),
    publish: (volume, stagingPath, targetPath, options) => publish(access, volume, stagingPath, targetPath, options),
    unpublish: (volume, targetPath) => unpublish(access, volume, targetPath),
    stats: (volume, dataPath, volumePath) => volumeStats(access, volume, dataPath, volumePath),
    restageAll: () => restageAll(access),
    assertNotInUse: (volume) => assertNotInUse(access, volume),
  };
}
