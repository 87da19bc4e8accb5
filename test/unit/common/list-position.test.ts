import {
  LIST_START,
  byVolumeIdOrder,
  continueInPool,
  isListPosition,
  nodeRemains,
  pastNode,
} from '../../../common/list-position';
import { formatSnapshotId, formatVolumeId } from '../../../common/names';

const pool = '0123456789abcdef';
const key = 'ab'.repeat(16);
const id = (nodeId: string, k = key, prefix = pool) => formatVolumeId({ nodeId, poolIdPrefix: prefix, key: k });

describe('list positions', () => {
  it('accepts the start, volume IDs and node boundaries, nothing else', () => {
    for (const position of [LIST_START, id('node-1'), pastNode('node-1'), pastNode('a.b-c')]) {
      expect(isListPosition(position)).toBe(true);
    }
    for (const position of [
      'garbage',
      'v1_node-1_zz',
      `${id('node-1')}x`,
      'v1_Node_~',
      'v1__~',
      'v1_a_b_~',
      'v2_a_~',
    ]) {
      expect(isListPosition(position)).toBe(false);
    }
  });

  it('puts a node boundary after every volume of that node and before every volume of the next', () => {
    const nodes = ['node-1', 'node-10', 'node-1a', 'node-2', 'node-1.x'].sort(byVolumeIdOrder);
    const ids = nodes.flatMap((nodeId) => [id(nodeId, '0'.repeat(32)), id(nodeId, 'f'.repeat(32), 'f'.repeat(16))]);
    expect([...ids].sort()).toEqual(ids);
    for (const [index, nodeId] of nodes.entries()) {
      const boundary = pastNode(nodeId);
      expect(ids.filter((volumeId) => volumeId <= boundary)).toEqual(ids.slice(0, 2 * index + 2));
      expect(nodeRemains(nodeId, boundary)).toBe(false);
      expect(nodeRemains(nodeId, ids[2 * index]!)).toBe(true);
      const next = nodes[index + 1];
      if (next) expect(nodeRemains(next, boundary)).toBe(true);
    }
  });

  it('tells a pool where to continue', () => {
    expect(continueInPool(LIST_START, 'node-2', pool)).toEqual({});
    expect(continueInPool(pastNode('node-1'), 'node-2', pool)).toEqual({});
    expect(continueInPool(id('node-2'), 'node-2', pool)).toEqual({ afterKey: key });
    expect(continueInPool(pastNode('node-2'), 'node-2', pool)).toBeUndefined();
    expect(continueInPool(id('node-3'), 'node-2', pool)).toBeUndefined();
    // The pool was replaced between pages: by the order of the prefixes, all or nothing of the new one.
    expect(continueInPool(id('node-2', key, '0'.repeat(16)), 'node-2', pool)).toEqual({});
    expect(continueInPool(id('node-2', key, 'f'.repeat(16)), 'node-2', pool)).toBeUndefined();
  });

  it('are of one list: snapshot positions (s1_) page snapshots the same way, never volumes', () => {
    const snapshot = (nodeId: string, k = key) => formatSnapshotId({ nodeId, poolIdPrefix: pool, key: k });
    for (const position of [LIST_START, snapshot('node-1'), pastNode('node-1', 's1')]) {
      expect(isListPosition(position, 's1')).toBe(true);
    }
    for (const position of [id('node-1'), pastNode('node-1'), 's1_node-1_zz', `${snapshot('node-1')}x`]) {
      expect(isListPosition(position, 's1')).toBe(false);
    }
    expect(isListPosition(snapshot('node-1'))).toBe(false);
    expect(nodeRemains('node-1', pastNode('node-1', 's1'))).toBe(false);
    expect(nodeRemains('node-2', pastNode('node-1', 's1'))).toBe(true);
    expect(nodeRemains('node-2', snapshot('node-2'))).toBe(true);
    expect(continueInPool(snapshot('node-2'), 'node-2', pool)).toEqual({ afterKey: key });
    expect(continueInPool(pastNode('node-1', 's1'), 'node-2', pool)).toEqual({});
    expect(continueInPool(pastNode('node-2', 's1'), 'node-2', pool)).toBeUndefined();
  });
});
