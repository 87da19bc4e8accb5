/** NodeGetVolumeStats: usage seen through the CO's path, and an abnormal condition when data or device is gone. */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import type { VolumeStats, VolumeUsage } from '../pool/backend';
import { assertCoPath } from './co-paths';
import { deviceBytes, showsVolume, topMountAt } from '../host/mounts';
import { pathExists } from '../host/files';
import { readStaging } from './staging-records';
import type { VolumeAccess, VolumeRef } from './volume-access';

/** `dataPath` is the volume's data in the pool (its directory or image file). */
export async function volumeStats(
  access: VolumeAccess,
  volume: VolumeRef,
  dataPath: string,
  volumePath: string,
): Promise<VolumeStats> {
  assertCoPath(volumePath, 'volume path');
  const { key } = volume;
  if (!(await pathExists(volumePath))) {
    throw new DriverError(FailureType.NotFound, `volume path ${volumePath} does not exist`);
  }
  if (!(await pathExists(dataPath))) {
    const usage = await filesystemUsage(volumePath).catch(() => []);
    return { usage, abnormal: true, message: `the volume's data ${dataPath} is missing from the pool` };
  }
  const attachment = await access.find(volume);
  const top = attachment && (await topMountAt(volumePath));
  if (!attachment || !top || !showsVolume(top, attachment.matchers)) {
    // Staged, yet nothing shows it: its device is gone (detached by hand). Otherwise the path is just not ours.
    const staging = await readStaging(access.layout, key);
    if (!attachment && staging) {
      const message = `volume ${key} is staged at ${staging.stagingPath} but has no device attached`;
      return { usage: [], abnormal: true, message };
    }
    throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${key}`);
  }
  const usage =
    volume.accessType === 'block' && attachment.device
      ? [{ unit: 'bytes' as const, total: await deviceBytes(attachment.device) }]
      : await filesystemUsage(volumePath);
  return { usage, abnormal: false, message: 'volume is healthy' };
}

async function filesystemUsage(volumePath: string): Promise<VolumeUsage[]> {
  const stats = await fs.statfs(volumePath);
  return [
    {
      unit: 'bytes',
      total: stats.blocks * stats.bsize,
      used: (stats.blocks - stats.bfree) * stats.bsize,
      available: stats.bavail * stats.bsize,
    },
    { unit: 'inodes', total: stats.files, used: stats.files - stats.ffree, available: stats.ffree },
  ];
}
