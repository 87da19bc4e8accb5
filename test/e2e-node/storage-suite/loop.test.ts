import { deployedNode } from '../deployed-node';
import { expectSuitePasses } from './expect-suite';

/**
 * Kubernetes' external storage suite (docs/storage-suite.md) on a real node whose agent runs the loop backend:
 * the loop-ext4 class (with raw block on loop) and the loop-xfs class, through kubelet, containerd and deploy/. The
 * pool is an XFS with reflinks, as a loop pool should be: only there can a raw block volume in use be cloned
 * (docs/snapshots.md, "Consistency"); the unit tests cover pools without.
 */
jest.setTimeout(4 * 60 * 60_000);

const real = deployedNode('dcsi-suite-loop', ['loop-backend'], 'xfs-reflink', 'suite');

test('the storage suite passes for loop ext4 (filesystem and raw block)', async () => {
  await expectSuitePasses(real.node, 'loop-ext4');
});

test('the storage suite passes for loop xfs', async () => {
  await expectSuitePasses(real.node, 'loop-xfs');
});
