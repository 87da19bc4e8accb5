import { deployedNode } from '../deployed-node';
import { expectSuitePasses } from './expect-suite';

/** Kubernetes' external storage suite (docs/storage-suite.md) on a real node whose agent runs the dir backend. */
jest.setTimeout(4 * 60 * 60_000);

const real = deployedNode('dcsi-suite-dir', [], undefined, 'suite');

test('the storage suite passes for dir (a directory, no filesystem of its own)', async () => {
  await expectSuitePasses(real.node, 'dir');
});
