import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities } from '../activities/node-activities';
import { formatVolumeId, poolIdPrefix } from '../common/volume-id';
import { listReportedNodes } from './reported-nodes';
import { listOptions } from './node-activity-options';

export interface ListedVolume {
  volumeId: string;
  name: string;
  nodeId: string;
  capacityBytes: number;
}

export interface ListVolumesResult {
  volumes: ListedVolume[];
  /** Registered nodes that did not answer: their volumes are missing from the list. */
  unreachableNodes: string[];
  /**
   * Nodes whose pools answered: only for these is a volume's absence from the list a fact. A node with no record
   * was never asked and appears in neither list (absent in results of earlier releases).
   */
  answeredNodes?: string[];
}

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

/**
 * Asks every live node for its volumes (the pools are the truth), in parallel, sorted by volume ID. Kept, unchanged,
 * for runs started by controllers of earlier releases (a rollout); this release lists through listVolumesPage,
 * because one result of every volume exceeds Temporal's 2 MB payload limit at about 10,000 volumes.
 */
export async function listVolumes(input: { driverName: string }): Promise<ListVolumesResult> {
  const nodes = await listReportedNodes(control);
  const unreachableNodes = nodes.filter((node) => !node.live).map((node) => node.nodeId);
  const answers = await Promise.all(
    nodes
      .filter((node) => node.live)
      .map(async (node) => {
        const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, node.nodeId));
        try {
          const volumes = await onNode.listVolumesOnNode();
          return volumes.map((volume) => ({
            volumeId: formatVolumeId({
              nodeId: node.nodeId,
              poolIdPrefix: poolIdPrefix(volume.poolId),
              key: volume.key,
            }),
            name: volume.name,
            nodeId: node.nodeId,
            capacityBytes: volume.capacityBytes,
          }));
        } catch (error) {
          if (!(error instanceof ActivityFailure)) throw error;
          unreachableNodes.push(node.nodeId);
          return [];
        }
      }),
  );
  const volumes = answers.flat().sort((a, b) => (a.volumeId < b.volumeId ? -1 : a.volumeId > b.volumeId ? 1 : 0));
  const unreachable = new Set(unreachableNodes);
  const answeredNodes = nodes.map((node) => node.nodeId).filter((nodeId) => !unreachable.has(nodeId));
  return { volumes, unreachableNodes: unreachableNodes.sort(), answeredNodes: answeredNodes.sort() };
}
