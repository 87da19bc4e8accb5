/**
 * `--dir-quota`: whether the dir backend enforces each volume's size with a project quota (`project`, the default)
 * or only reserves it (`none`, for development). The decision at start is here: does the filesystem holding the
 * pool enforce project quotas? It is read from /proc/self/mountinfo (the filesystem's own options), which is
 * what the kernel enforces; `xfs_quota`'s `state` prints nothing and exits 0 where quotas are off.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { isNotFound } from '../host/files';
import { mountHolding, readMounts } from '../host/mounts';
import type { MountEntry } from '../host/mounts';

export const DIR_QUOTA_MODES = ['project', 'none'] as const;
export type DirQuotaMode = (typeof DIR_QUOTA_MODES)[number];

/** What a person needs to do for the pool's filesystem to enforce project quotas; undefined when it does. */
export function missingProjectQuota(mount: Pick<MountEntry, 'fsType' | 'superOptions'>): string | undefined {
  const options = new Set(mount.superOptions);
  switch (mount.fsType) {
    case 'xfs':
      // The kernel shows `prjquota` when project quotas are enforced and `pqnoenforce` when only accounted.
      if (options.has('prjquota') || options.has('pquota')) return undefined;
      return options.has('pqnoenforce')
        ? 'its project quotas are accounted but not enforced: mount it with -o prjquota instead of pqnoenforce'
        : 'mount the XFS filesystem with -o prjquota (it cannot be turned on by a remount; for the root ' +
            'filesystem, boot with rootflags=prjquota)';
    case 'ext4':
      if (options.has('prjquota')) return undefined;
      return (
        'give the ext4 filesystem the project quota feature (tune2fs -O quota,project, unmounted) and mount it ' +
        'with -o prjquota'
      );
    default:
      return `project quotas need XFS or ext4: put the pool on XFS mounted -o prjquota, or ext4 with -O quota,project mounted -o prjquota`;
  }
}

/** The refusal: names the pool, its filesystem, what is missing, and the development way out. */
export function projectQuotaRefusal(pool: string, mount: Pick<MountEntry, 'fsType' | 'mountPoint'>, missing: string) {
  return (
    `--dir-quota=project: pool ${pool} is on the ${mount.fsType} filesystem mounted at ${mount.mountPoint}, which ` +
    `does not enforce project quotas, so a volume could fill it: ${missing}. For development only, ` +
    `--dir-quota=none runs the dir backend without enforcing volume sizes.`
  );
}

/** The mount holding the pool (or, before the pool exists, its nearest existing parent). */
export async function poolMount(pool: string): Promise<MountEntry> {
  let candidate = path.resolve(pool);
  for (;;) {
    try {
      await fs.stat(candidate);
      return (await mountHolding(candidate, await readMounts())).holder;
    } catch (error) {
      if (!isNotFound(error) || candidate === path.dirname(candidate)) throw error;
      candidate = path.dirname(candidate);
    }
  }
}

/** At start with --dir-quota=project: FailedPrecondition with the refusal unless the pool's filesystem enforces. */
export async function assertProjectQuotas(pool: string): Promise<MountEntry> {
  const mount = await poolMount(pool);
  const missing = missingProjectQuota(mount);
  if (missing !== undefined) {
    throw new DriverError(FailureType.FailedPrecondition, projectQuotaRefusal(pool, mount, missing));
  }
  return mount;
}
