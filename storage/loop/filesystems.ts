/** The filesystems the loop backend makes and grows, and the smallest volume each can live on. */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { AccessType } from '../pool/backend';
import { FORMAT_TIMEOUT_MS, ToolError, runTool } from '../host/tools';

/** The default first. */
export const LOOP_FS_TYPES = ['ext4', 'xfs'] as const;
export type LoopFsType = (typeof LOOP_FS_TYPES)[number];

const MiB = 1024 ** 2;
/** mkfs.xfs refuses anything under 300 MiB; ext4 and raw devices work from 1 MiB. */
const MINIMUM_BYTES: Record<LoopFsType | 'block', number> = { ext4: MiB, xfs: 300 * MiB, block: MiB };

/** The smallest volume a loop backend can make for this access type and filesystem. */
export function minimumLoopBytes(accessType: AccessType, fsType: string | undefined): number {
  return MINIMUM_BYTES[accessType === 'block' ? 'block' : isLoopFsType(fsType ?? '') ? (fsType as LoopFsType) : 'ext4'];
}

function isLoopFsType(value: string): value is LoopFsType {
  return (LOOP_FS_TYPES as readonly string[]).includes(value);
}

/** Empty means the default; anything else must be one we format (InvalidArgument). */
export function loopFsType(requested: string | undefined): LoopFsType {
  const fsType = requested || LOOP_FS_TYPES[0];
  if (!isLoopFsType(fsType)) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `fsType "${fsType}" is not supported by the loop backend (use ${LOOP_FS_TYPES.join(' or ')})`,
    );
  }
  return fsType;
}

/** OutOfRange below the smallest size the filesystem (or a raw device) can use. */
export function assertLoopSize(capacityBytes: number, accessType: AccessType, fsType: LoopFsType | undefined) {
  const kind = accessType === 'block' ? 'block' : (fsType ?? LOOP_FS_TYPES[0]);
  if (capacityBytes < MINIMUM_BYTES[kind]) {
    throw new DriverError(
      FailureType.OutOfRange,
      `a loop ${kind} volume needs at least ${formatBytes(MINIMUM_BYTES[kind])} (requested ${capacityBytes} bytes)`,
    );
  }
}

/** Formats an image file directly (no device needed). No discard: it would punch holes in the preallocation. */
export async function makeFilesystem(fsType: LoopFsType, file: string): Promise<void> {
  const args = fsType === 'ext4' ? ['-q', '-F', '-E', 'nodiscard', file] : ['-q', '-K', file];
  await runTool(`mkfs.${fsType}`, args, { timeoutMs: FORMAT_TIMEOUT_MS });
}

/** Online growth to the device's size: ext4 by its device, xfs by a mount point. */
export async function growFilesystem(fsType: LoopFsType, device: string, mountPoint: string): Promise<void> {
  if (fsType === 'xfs') {
    await runTool('xfs_growfs', [mountPoint], { timeoutMs: FORMAT_TIMEOUT_MS });
    return;
  }
  try {
    await runTool('resize2fs', [device], { timeoutMs: FORMAT_TIMEOUT_MS });
  } catch (error) {
    if (error instanceof ToolError && /Permission denied to resize/.test(error.stderr)) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `growing the mounted ext4 filesystem on ${device} needs CAP_SYS_RESOURCE, which this node agent lacks; ` +
          'it grows when the volume is next staged (unstaged volumes are grown before they are mounted)',
      );
    }
    throw error;
  }
}

/**
 * Offline growth of an ext4 filesystem that is not mounted, when the device outgrew it (the volume was expanded
 * while unstaged): needs no privilege beyond writing the device. The same test as Kubernetes' mount-utils: a
 * filesystem within one block of the device is left alone.
 */
export async function growExt4IfSmaller(device: string, deviceSize: number): Promise<boolean> {
  const header = await runTool('dumpe2fs', ['-h', device]);
  const blockCount = Number(/^Block count:\s+(\d+)$/m.exec(header)?.[1]);
  const blockSize = Number(/^Block size:\s+(\d+)$/m.exec(header)?.[1]);
  if (!(blockCount > 0 && blockSize > 0) || deviceSize <= blockCount * blockSize + blockSize) return false;
  // resize2fs refuses an unmounted filesystem that has not just been checked.
  await runTool('e2fsck', ['-f', '-p', device], { timeoutMs: FORMAT_TIMEOUT_MS, okExitCodes: [1] });
  await runTool('resize2fs', [device], { timeoutMs: FORMAT_TIMEOUT_MS });
  return true;
}
