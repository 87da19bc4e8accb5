import { TOPOLOGY_NODE_KEY } from '../common/names';

/** CSI Node: identity of this node and its capabilities. Staging and publishing arrive with the loop backend. */
export function createNodeService(options: { nodeId: string }) {
  return {
    async NodeGetInfo() {
      return {
        node_id: options.nodeId,
        max_volumes_per_node: '0',
        accessible_topology: { segments: { [TOPOLOGY_NODE_KEY]: options.nodeId } },
      };
    },
    async NodeGetCapabilities() {
      return { capabilities: [] };
    },
  };
}
