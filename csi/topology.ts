import { DriverError, FailureType } from '../common/failures';
import { TOPOLOGY_NODE_KEY } from '../common/names';
import type { Topology__Output } from './generated/csi/v1/Topology';

/** Our only topology key is the node; any other key means the request was meant for another driver. */
export function nodesOfTopologies(topologies: Topology__Output[], field: string): string[] {
  return topologies.map((topology) => {
    const keys = Object.keys(topology.segments);
    const nodeId = topology.segments[TOPOLOGY_NODE_KEY];
    if (keys.length !== 1 || !nodeId) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `accessibility_requirements.${field}: each topology must have exactly the key ${TOPOLOGY_NODE_KEY} (got ${keys.join(', ') || 'none'})`,
      );
    }
    return nodeId;
  });
}

export function nodeTopology(nodeId: string) {
  return { segments: { [TOPOLOGY_NODE_KEY]: nodeId } };
}
