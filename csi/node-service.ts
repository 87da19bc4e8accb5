import { TOPOLOGY_NODE_KEY } from '../common/names';
import type { NodeContext } from './node-requests';
import { healthHandlers } from './node-health';
import { publishHandlers } from './node-publish';
import { stageHandlers } from './node-stage';
import { volumeStatusHandlers } from './node-volume-status';

const CAPABILITIES = [
  'STAGE_UNSTAGE_VOLUME',
  'GET_VOLUME_STATS',
  'VOLUME_CONDITION',
  'EXPAND_VOLUME',
  'GET_VOLUME_HEALTH',
  'GET_STORAGE_HEALTH',
];

/** CSI Node: this node's identity and capabilities, and staging, publishing, stats, health and expansion of its volumes. */
export function createNodeService(context: NodeContext) {
  return {
    async NodeGetInfo() {
      return {
        node_id: context.nodeId,
        max_volumes_per_node: '0',
        accessible_topology: { segments: { [TOPOLOGY_NODE_KEY]: context.nodeId } },
      };
    },
    async NodeGetCapabilities() {
      return { capabilities: CAPABILITIES.map((type) => ({ rpc: { type } })) };
    },
    ...stageHandlers(context),
    ...publishHandlers(context),
    ...volumeStatusHandlers(context),
    ...healthHandlers(context),
  };
}
