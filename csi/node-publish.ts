/** NodePublishVolume and NodeUnpublishVolume: bind mounts of the staged volume at each pod's target path. */
import type { NodePublishVolumeRequest__Output } from './generated/csi/v1/NodePublishVolumeRequest';
import type { NodePublishVolumeResponse } from './generated/csi/v1/NodePublishVolumeResponse';
import type { NodeUnpublishVolumeRequest__Output } from './generated/csi/v1/NodeUnpublishVolumeRequest';
import type { NodeUnpublishVolumeResponse } from './generated/csi/v1/NodeUnpublishVolumeResponse';
import type { NodeContext } from './node-requests';
import { required, requiredPath, stageOptions, volumeKey } from './node-requests';

export function publishHandlers(context: NodeContext) {
  return {
    async NodePublishVolume(request: NodePublishVolumeRequest__Output): Promise<NodePublishVolumeResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      const targetPath = await requiredPath(request.target_path, 'target_path', context);
      // We advertise STAGE_UNSTAGE_VOLUME: every publish comes after a stage and names its path.
      const stagingPath = await requiredPath(request.staging_target_path, 'staging_target_path', context);
      const { accessType } = stageOptions(request.volume_capability, context.backend);
      const readerOnly = request.volume_capability?.access_mode?.mode === 'SINGLE_NODE_READER_ONLY';
      // A read-only raw block publish gets a device the kernel keeps read-only (storage/pool/publishing.ts).
      await context.backend.publishVolume(volumeKey(volumeId, context), stagingPath, targetPath, {
        accessType,
        readonly: request.readonly || readerOnly,
      });
      return {};
    },

    async NodeUnpublishVolume(request: NodeUnpublishVolumeRequest__Output): Promise<NodeUnpublishVolumeResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      const targetPath = await requiredPath(request.target_path, 'target_path', context);
      await context.backend.unpublishVolume(volumeKey(volumeId, context), targetPath);
      return {};
    },
  };
}
