/** NodeStageVolume and NodeUnstageVolume: attach and mount once per node, at the CO's staging path. */
import type { NodeStageVolumeRequest__Output } from './generated/csi/v1/NodeStageVolumeRequest';
import type { NodeStageVolumeResponse } from './generated/csi/v1/NodeStageVolumeResponse';
import type { NodeUnstageVolumeRequest__Output } from './generated/csi/v1/NodeUnstageVolumeRequest';
import type { NodeUnstageVolumeResponse } from './generated/csi/v1/NodeUnstageVolumeResponse';
import type { NodeContext } from './node-requests';
import { required, requiredPath, stageOptions, volumeKey } from './node-requests';

export function stageHandlers(context: NodeContext) {
  return {
    async NodeStageVolume(request: NodeStageVolumeRequest__Output): Promise<NodeStageVolumeResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      const stagingPath = await requiredPath(request.staging_target_path, 'staging_target_path', context);
      const options = stageOptions(request.volume_capability, context.backend);
      await context.backend.stageVolume(volumeKey(volumeId, context), stagingPath, options);
      return {};
    },

    async NodeUnstageVolume(request: NodeUnstageVolumeRequest__Output): Promise<NodeUnstageVolumeResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      const stagingPath = await requiredPath(request.staging_target_path, 'staging_target_path', context);
      await context.backend.unstageVolume(volumeKey(volumeId, context), stagingPath);
      return {};
    },
  };
}
