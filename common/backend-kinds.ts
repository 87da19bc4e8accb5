/**
 * What each node storage backend can serve: the controller places volumes and checks CreateVolume by it, the
 * backends make volumes by it. No Node built-ins.
 */
export const BACKEND_KINDS = ['dir', 'loop'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

/** A dir volume is a directory: it has no block device to hand over. */
export function supportsBlock(backend: string): boolean {
  return backend === 'loop';
}

/** How a volume is used: a mounted filesystem or a raw block device. */
export type AccessType = 'mount' | 'block';

/** The filesystems the loop backend makes and grows, the default first; the dir backend ignores the choice. */
export const LOOP_FS_TYPES = ['ext4', 'xfs'] as const;
export type LoopFsType = (typeof LOOP_FS_TYPES)[number];

const MiB = 1024 ** 2;
/** mkfs.xfs refuses anything under 300 MiB; ext4 and raw devices work from 1 MiB. */
export const MINIMUM_LOOP_BYTES: Record<LoopFsType | 'block', number> = { ext4: MiB, xfs: 300 * MiB, block: MiB };

/** The smallest volume a loop backend can make for this access type and filesystem. */
export function minimumLoopBytes(accessType: AccessType, fsType: string | undefined): number {
  return MINIMUM_LOOP_BYTES[
    accessType === 'block' ? 'block' : isLoopFsType(fsType ?? '') ? (fsType as LoopFsType) : 'ext4'
  ];
}

export function isLoopFsType(value: string): value is LoopFsType {
  return (LOOP_FS_TYPES as readonly string[]).includes(value);
}
