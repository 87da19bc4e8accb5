/** NodeGetVolumeStats and NodeExpandVolume: what a published volume holds, and growing it in place. */
import path from 'node:path';
import { DriverError, FailureType } from '../common/failures';
import type { NodeExpandVolumeRequest__Output } from './generated/csi/v1/NodeExpandVolumeRequest';
import type { NodeExpandVolumeResponse } from './generated/csi/v1/NodeExpandVolumeResponse';
import type { NodeGetVolumeStatsRequest__Output } from './generated/csi/v1/NodeGetVolumeStatsRequest';
import type { NodeGetVolumeStatsResponse } from './generated/csi/v1/NodeGetVolumeStatsResponse';
import { assertInKubeletDir } from './kubelet-paths';
import type { NodeContext } from './node-requests';
import { required, volumeKey } from './node-requests';
import { toBytes } from './validate-create';

export function volumeStatusHandlers(context: NodeContext) {
  return {
    async NodeGetVolumeStats(request: NodeGetVolumeStatsRequest__Output): Promise<NodeGetVolumeStatsResponse> {
      const { key, volumePath } = await volumeAndPath(request, context);
      const stats = await context.backend.volumeStats(key, volumePath);
      return {
        usage: stats.usage.map((usage) => ({
          unit: usage.unit === 'bytes' ? 'BYTES' : 'INODES',
          total: String(usage.total),
          used: String(usage.used ?? 0),
          available: String(usage.available ?? 0),
        })),
        volume_condition: { abnormal: stats.abnormal, message: stats.message },
      };
    },

    async NodeExpandVolume(request: NodeExpandVolumeRequest__Output): Promise<NodeExpandVolumeResponse> {
      const { key, volumePath } = await volumeAndPath(request, context);
      const volumeId = request.volume_id;
      const requiredBytes = toBytes(request.capacity_range?.required_bytes, 'required_bytes');
      const { capacityBytes } = await context.backend.expandFilesystem(key, volumePath);
      if (capacityBytes < requiredBytes) {
        throw new DriverError(
          FailureType.OutOfRange,
          `volume ${volumeId} is ${capacityBytes} bytes, less than the ${requiredBytes} asked for: ` +
            'ControllerExpandVolume has not grown it yet',
        );
      }
      return { capacity_bytes: String(capacityBytes) };
    },
  };
}

/**
 * Both fields are required (INVALID_ARGUMENT); then an unknown volume is NOT_FOUND, and so is a path that
 * cannot be where this volume is published, as the spec and csi-sanity expect: a relative one, or one outside
 * --kubelet-dir (after `..` and links), where the agent never publishes: it is not statted, let alone grown.
 */
async function volumeAndPath(request: { volume_id: string; volume_path: string }, context: NodeContext) {
  const volumeId = required(request.volume_id, 'volume_id');
  required(request.volume_path, 'volume_path');
  const key = volumeKey(volumeId, context);
  if (!path.isAbsolute(request.volume_path) || request.volume_path.includes('\0')) {
    throw new DriverError(FailureType.NotFound, `volume ${volumeId} is not published at ${request.volume_path}`);
  }
  try {
    await assertInKubeletDir(request.volume_path, 'volume_path', context.kubeletDir);
  } catch (error) {
    if (!(error instanceof DriverError) || error.type !== FailureType.InvalidArgument) throw error;
    throw new DriverError(
      FailureType.NotFound,
      `volume ${volumeId} is not published at ${request.volume_path}: ${error.message}`,
    );
  }
  return { key, volumePath: request.volume_path };
}
