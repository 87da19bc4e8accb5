import { FailureType } from '../../../common/failures';
import { TOPOLOGY_NODE_KEY } from '../../../common/names';
import type { Topology__Output } from '../../../csi/generated/csi/v1/Topology';
import { nodeTopology, nodesOfTopologies } from '../../../csi/validate-create';
import { expectDriverError } from '../../support/driver-error';

describe('nodesOfTopologies', () => {
  it('returns the node of each topology in order', () => {
    const topologies = [{ segments: { [TOPOLOGY_NODE_KEY]: 'n2' } }, { segments: { [TOPOLOGY_NODE_KEY]: 'n1' } }];
    expect(nodesOfTopologies(topologies, 'requisite')).toEqual(['n2', 'n1']);
  });

  it('returns nothing for no topologies', () => {
    expect(nodesOfTopologies([], 'preferred')).toEqual([]);
  });

  it('refuses a topology with only a foreign key, naming the field and the key', () => {
    const error = expectDriverError(
      () => nodesOfTopologies([{ segments: { 'topology.kubernetes.io/zone': 'a' } }], 'requisite'),
      FailureType.InvalidArgument,
    );
    expect(error.message).toBe(
      `accessibility_requirements.requisite: each topology must have exactly the key ${TOPOLOGY_NODE_KEY} ` +
        '(got topology.kubernetes.io/zone)',
    );
  });

  it('refuses our key alongside a foreign one', () => {
    const segments = { [TOPOLOGY_NODE_KEY]: 'n1', 'topology.kubernetes.io/zone': 'a' };
    expectDriverError(() => nodesOfTopologies([{ segments }], 'preferred'), FailureType.InvalidArgument, /preferred/);
  });

  it('refuses an empty segment map and an empty node ID', () => {
    expectDriverError(() => nodesOfTopologies([{ segments: {} }], 'requisite'), FailureType.InvalidArgument, /none/);
    expectDriverError(
      () => nodesOfTopologies([{ segments: { [TOPOLOGY_NODE_KEY]: '' } }], 'requisite'),
      FailureType.InvalidArgument,
    );
  });

  it('refuses the whole list when any one topology is foreign', () => {
    const topologies: Topology__Output[] = [
      { segments: { [TOPOLOGY_NODE_KEY]: 'n1' } },
      { segments: { 'example.com/rack': 'r1' } },
    ];
    expectDriverError(
      () => nodesOfTopologies(topologies, 'requisite'),
      FailureType.InvalidArgument,
      /example\.com\/rack/,
    );
  });
});

describe('nodeTopology', () => {
  it('builds the single-key topology of a node, which nodesOfTopologies reads back', () => {
    expect(TOPOLOGY_NODE_KEY).toBe('topology.durable-csi.io/node');
    expect(nodeTopology('n7')).toEqual({ segments: { 'topology.durable-csi.io/node': 'n7' } });
    expect(nodesOfTopologies([nodeTopology('n7')], 'preferred')).toEqual(['n7']);
  });
});
