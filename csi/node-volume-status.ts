/** NodeGetVolumeStats and NodeExpandVolume: what a published volume holds, and growing it in place. */
import { DriverError, FailureType } from '../common/failures';
import type { NodeExpandVolumeRequest__Output } from './generated/csi/v1/NodeExpandVolumeRequest';
import type { NodeExpandVolumeResponse } from './generated/csi/v1/NodeExpandVolumeResponse';
import type { NodeGetVolumeStatsRequest__Output } from './generated/csi/v1/NodeGetVolumeStatsRequest';
import type { NodeGetVolumeStatsResponse } from './generated/csi/v1/NodeGetVolumeStatsResponse';
import type { NodeContext } from './node-requests';
import { required, requiredPath, volumeKey } from './node-requests';
import { toBytes } from './validate-create';

export function volumeStatusHandlers(context: NodeContext) {
  return {
    async NodeGetVolumeStats(request: NodeGetVolumeStatsRequest__Output): Promise<NodeGetVolumeStatsResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      const volumePath = requiredPath(request.volume_path, 'volume_path');
      const stats = await context.backend.volumeStats(volumeKey(volumeId, context), volumePath);
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
      const volumeId = required(request.volume_id, 'volume_id');
      const volumePath = requiredPath(request.volume_path, 'volume_path');
      const requiredBytes = toBytes(request.capacity_range?.required_bytes, 'required_bytes');
      const { capacityBytes } = await context.backend.expandFilesystem(volumeKey(volumeId, context), volumePath);
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
