/** Node RPCs over a node agent's socket, and kubelet-style paths. */
import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { NodeExpandVolumeResponse__Output } from '../../csi/generated/csi/v1/NodeExpandVolumeResponse';
import type { NodeGetCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/NodeGetCapabilitiesResponse';
import type { NodeGetStorageHealthResponse__Output } from '../../csi/generated/csi/v1/NodeGetStorageHealthResponse';
import type { NodeGetVolumeHealthResponse__Output } from '../../csi/generated/csi/v1/NodeGetVolumeHealthResponse';
import type { NodeGetVolumeStatsResponse__Output } from '../../csi/generated/csi/v1/NodeGetVolumeStatsResponse';
import type { VolumeCapability } from '../../csi/generated/csi/v1/VolumeCapability';
import { parseVolumeId } from '../../common/names';
import type { TestCluster } from '../support/cluster';

export type Backend = 'dir' | 'loop';

export function mountCapability(fsType = ''): VolumeCapability {
  return { mount: { fs_type: fsType, mount_flags: [] }, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
}

export const BLOCK_CAPABILITY: VolumeCapability = { block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } };

/** What kubelet would use: a staging directory it made, and a pod target whose parent exists. */
export function kubeletPaths(cluster: TestCluster, volumeId: string, pod = 'pod-1') {
  const key = parseVolumeId(volumeId)?.key ?? 'unknown';
  const staging = path.join(cluster.root, 'kubelet', 'staging', key);
  const target = path.join(cluster.root, 'kubelet', 'pods', pod, key);
  fs.mkdirSync(staging, { recursive: true });
  fs.mkdirSync(path.dirname(target), { recursive: true });
  return { staging, target };
}

export function nodeRpcs(clients: CsiClients) {
  const { node } = clients;
  return {
    capabilities: () =>
      call<NodeGetCapabilitiesResponse__Output>((done) => node.NodeGetCapabilities({}, withDeadline(), done)),
    stage: (volumeId: string, stagingPath: string, capability: VolumeCapability | null = mountCapability()) =>
      call<object>((done) =>
        node.NodeStageVolume(
          { volume_id: volumeId, staging_target_path: stagingPath, volume_capability: capability },
          withDeadline(),
          done,
        ),
      ),
    unstage: (volumeId: string, stagingPath: string) =>
      call<object>((done) =>
        node.NodeUnstageVolume({ volume_id: volumeId, staging_target_path: stagingPath }, withDeadline(), done),
      ),
    publish: (volumeId: string, paths: { staging: string; target: string }, capability = mountCapability()) =>
      call<object>((done) =>
        node.NodePublishVolume(
          {
            volume_id: volumeId,
            staging_target_path: paths.staging,
            target_path: paths.target,
            volume_capability: capability,
          },
          withDeadline(),
          done,
        ),
      ),
    unpublish: (volumeId: string, targetPath: string) =>
      call<object>((done) =>
        node.NodeUnpublishVolume({ volume_id: volumeId, target_path: targetPath }, withDeadline(), done),
      ),
    stats: (volumeId: string, volumePath: string) =>
      call<NodeGetVolumeStatsResponse__Output>((done) =>
        node.NodeGetVolumeStats({ volume_id: volumeId, volume_path: volumePath }, withDeadline(), done),
      ),
    volumeHealth: (volumeId: string, paths: { staging?: string; target?: string } = {}) =>
      call<NodeGetVolumeHealthResponse__Output>((done) =>
        node.NodeGetVolumeHealth(
          { volume_id: volumeId, staging_target_path: paths.staging ?? '', volume_publish_path: paths.target ?? '' },
          withDeadline(),
          done,
        ),
      ).then((answer) => answer.volume_health?.health_statuses ?? []),
    storageHealth: () =>
      call<NodeGetStorageHealthResponse__Output>((done) => node.NodeGetStorageHealth({}, withDeadline(), done)).then(
        (answer) => answer.backend_health,
      ),
    expand: (volumeId: string, volumePath: string, requiredBytes: number) =>
      call<NodeExpandVolumeResponse__Output>((done) =>
        node.NodeExpandVolume(
          { volume_id: volumeId, volume_path: volumePath, capacity_range: { required_bytes: String(requiredBytes) } },
          withDeadline(60_000),
          done,
        ),
      ),
  };
}
