/**
 * Making and growing the loop backend's filesystems. Which ones, and the smallest volume each can live on, are in
 * common/backend-kinds.ts: the controller checks CreateVolume by the same list.
 */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import { isLoopFsType, LOOP_FS_TYPES, MINIMUM_LOOP_BYTES } from '../../common/backend-kinds';
import type { AccessType, LoopFsType } from '../../common/backend-kinds';
import { FORMAT_TIMEOUT_MS, ToolError, runTool } from '../host/tools';

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
  if (capacityBytes < MINIMUM_LOOP_BYTES[kind]) {
    throw new DriverError(
      FailureType.OutOfRange,
      `a loop ${kind} volume needs at least ${formatBytes(MINIMUM_LOOP_BYTES[kind])} (requested ${capacityBytes} bytes)`,
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
