import type { NodeView } from '../../../common/names';
import { evacuationTargets, planEvacuation } from '../../../operations/move-operations';

/**
 * `nodes evacuate`'s plan (operations/move-operations.ts): each claim's volume to the admitted node with the most room
 * left, the largest first, none to a node that cannot take it; and which nodes are targets at all.
 */
const GiB = 1024 ** 3;
const volume = (n: number, gib: number, allowedNodes?: string[]) => ({
  volumeId: `v1_node-a_0123456789abcdef_${String(n).padStart(32, '0')}`,
  claim: `default/data-${n}`,
  capacityBytes: gib * GiB,
  ...(allowedNodes ? { allowedNodes } : {}),
});

describe('planEvacuation', () => {
  it('places the largest first, each on the admitted node with the most room left, and refuses what fits nowhere', () => {
    const plan = planEvacuation(
      [volume(1, 2), volume(2, 6), volume(3, 3), volume(4, 1, ['node-c']), volume(5, 9)],
      [
        { nodeId: 'node-b', availableBytes: 8 * GiB },
        { nodeId: 'node-c', availableBytes: 5 * GiB },
      ],
    );
    const of = (step: (typeof plan)[number]) => ('claim' in step ? step.claim : undefined);
    expect(plan.map((step) => [of(step), 'targetNodeId' in step ? step.targetNodeId : step.refused])).toEqual([
      ['default/data-5', 'no node has room for it (the most: node-b, 8Gi available)'],
      ['default/data-2', 'node-b'], // node-b: 8 -> 2 left
      ['default/data-3', 'node-c'], // node-c: 5 -> 2 left
      ['default/data-1', 'node-b'], // a tie at 2: by name; node-b 0 left
      ['default/data-4', 'node-c'], // only node-c admitted: 2 -> 1 left
    ]);
  });

  it('refuses a volume whose StorageClass admits no target, saying which nodes it admits', () => {
    const [step] = planEvacuation([volume(1, 1, ['node-z'])], [{ nodeId: 'node-b', availableBytes: 8 * GiB }]);
    expect(step).toMatchObject({ refused: 'its StorageClass admits only node-z, and none of them can take it' });
    const [none] = planEvacuation([volume(1, 1)], []);
    expect(none).toMatchObject({ refused: 'no live node serves node-to-node copies on a loop pool' });
  });

  it("plans snapshots after the volumes, largest first, to the room the volumes left; a group's member is refused", () => {
    const snapshot = (n: number, gib: number, group?: string) => ({
      snapshotId: `s1_node-a_0123456789abcdef_${String(n).padStart(32, '0')}`,
      volumeSnapshot: `default/snap-${n}`,
      sizeBytes: gib * GiB,
      ...(group ? { groupSnapshotHandle: group } : {}),
    });
    const plan = planEvacuation(
      [volume(1, 4)],
      [
        { nodeId: 'node-b', availableBytes: 6 * GiB },
        { nodeId: 'node-c', availableBytes: 3 * GiB },
      ],
      [snapshot(1, 1), snapshot(2, 3), snapshot(3, 1, 'g1_node-a_0123456789abcdef_' + '9'.repeat(32)), snapshot(4, 2)],
    );
    const said = plan.map((step) => [
      'snapshotId' in step ? step.volumeSnapshot : step.volumeId,
      'targetNodeId' in step ? step.targetNodeId : step.refused,
    ]);
    expect(said).toEqual([
      [volume(1, 4).volumeId, 'node-b'], // node-b: 6 -> 2
      ['default/snap-2', 'node-c'], // node-c: 3 -> 0
      ['default/snap-4', 'node-b'], // node-b: 2 -> 0
      ['default/snap-1', 'no node has room for it (the most: node-b, 0B available)'],
      [
        'default/snap-3',
        expect.stringMatching(/^a member of group snapshot g1_\S+: a group moves whole or not at all$/),
      ],
    ]);
  });
});

describe('evacuationTargets', () => {
  const view = (nodeId: string, overrides: Partial<NodeView> = {}): NodeView =>
    ({
      nodeId,
      live: true,
      backend: 'loop',
      availableBytes: GiB,
      transfer: { host: '10.0.0.1', port: 9470, publicKey: 'k' },
      ...overrides,
    }) as NodeView;

  it('are the live nodes of the source backend serving copies, less the source, the cordoned and those not named', () => {
    const nodes = [
      view('node-a'),
      view('node-b'),
      view('node-c', { live: false }),
      view('node-d', { backend: 'dir' }),
      view('node-e', { transfer: undefined }),
      view('node-f'),
      view('node-g'),
    ];
    const ids = (options = {}) => evacuationTargets(nodes, 'node-a', options).map((target) => target.nodeId);
    expect(ids()).toEqual(['node-b', 'node-f', 'node-g']);
    expect(ids({ unschedulable: ['node-f'] })).toEqual(['node-b', 'node-g']);
    expect(ids({ only: ['node-g', 'node-c'] })).toEqual(['node-g']);
    // A dir node's volumes go to dir nodes only (an archive of a tree, not an image).
    const dirNodes = [view('node-a', { backend: 'dir' }), view('node-b'), view('node-d', { backend: 'dir' })];
    expect(evacuationTargets(dirNodes, 'node-a').map((target) => target.nodeId)).toEqual(['node-d']);
  });
});
