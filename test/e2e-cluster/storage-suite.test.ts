import { deployedCluster } from '../e2e-node/deployed-node';
import { expectSuitePasses } from '../e2e-node/storage-suite/expect-suite';
import { itSpecs } from '../e2e-node/storage-suite/run-suite';
import { MULTI_NODE_FOCUS } from '../e2e-node/storage-suite/scope';
import { TOO_FEW_NODES } from '../e2e-node/storage-suite/skips';

/**
 * Kubernetes' storage suite, the specs that need several nodes (issue 35 item 6), for loop ext4 on three real nodes:
 * on the single node of test/e2e-node/storage-suite they skip themselves for too few nodes or topology segments.
 * Run by `npm run test:cluster` (docs/storage-suite.md).
 */
jest.setTimeout(60 * 60_000);

const real = deployedCluster(
  { nodes: ['dcsi-s1', 'dcsi-s2', 'dcsi-s3'], poolFilesystem: 'xfs-reflink' },
  { components: ['loop-backend'], imageSet: 'suite' },
);

test("the storage suite's multi-node specs pass for loop ext4 on three nodes: none skips for too few nodes", async () => {
  const outcome = await expectSuitePasses(real.node, 'loop-ext4', MULTI_NODE_FOCUS, '-three-nodes');
  const specs = itSpecs(outcome.specs);
  // Three nodes are enough for every spec: a skip for too few would mean the cluster is not what the spec needs.
  expect(specs.filter((spec) => TOO_FEW_NODES.test(spec.message)).map((spec) => spec.name)).toEqual([]);
  // Both topology specs ran and passed in each binding pattern the suite offers a topology driver (delayed binding
  // at least: every durable-csi class has it).
  const topology = specs.filter((spec) => / topology /.test(spec.name));
  const passed = (text: string) => topology.filter((spec) => spec.status === 'passed' && spec.name.includes(text));
  const delayed = passed('delayed binding').map((spec) => spec.name);
  expect(delayed).toHaveLength(2);
  expect(delayed).toEqual(
    expect.arrayContaining([
      expect.stringContaining('should provision a volume and schedule a pod with AllowedTopologies'),
      expect.stringContaining(
        'should fail to schedule a pod which has topologies that conflict with AllowedTopologies',
      ),
    ]),
  );
});
