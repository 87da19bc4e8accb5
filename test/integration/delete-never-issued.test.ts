import { WorkflowNotFoundError } from '@temporalio/client';
import { deleteWorkflowId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { deleteVolume } from '../support/csi-requests';

/** Invariant 2: an ID this driver could not have issued, or one naming a node never seen, is provably gone. */
describe('DeleteVolume of volumes that provably never existed', () => {
  const cluster = new TestCluster('never');
  afterAll(() => cluster.teardown());

  it('answers success at once, starting nothing', async () => {
    await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController()).endpoint);
    const ids = [
      'not-a-volume-id',
      'v1_node-1_00_11',
      '../../etc/passwd',
      `v1_node-never-seen_0123456789abcdef_${'a'.repeat(32)}`,
    ];
    for (const volumeId of ids) {
      const started = Date.now();
      await expect(deleteVolume(clients, volumeId, 5000)).resolves.toEqual({});
      expect(Date.now() - started).toBeLessThan(2000);
    }
    const client = await cluster.temporal();
    for (const volumeId of ids) {
      const handle = client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId));
      await expect(handle.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    }
  });
});
