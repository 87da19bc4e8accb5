import { WorkflowNotFoundError } from '@temporalio/client';
import { deleteWorkflowId, PhaseKey } from '../../common/names';
import { forgetNode } from '../../operations/forget-node';
import type { DeleteVolumeResult } from '../../workflows/node-work';
import { TestCluster } from '../support/cluster';
import { deleteVolume } from '../support/csi-requests';

/**
 * Invariant 2: only a malformed ID is provably gone without asking a node. A well-formed ID naming a node that
 * nobody knows waits like any offline node (no missing record is proof), until that node's agent runs the
 * deletion or an operator forgets the node.
 */
describe('DeleteVolume of IDs the driver cannot place', () => {
  const cluster = new TestCluster('unknown');
  afterAll(() => cluster.teardown());

  it('answers success at once for malformed IDs, starting nothing', async () => {
    await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController()).endpoint);
    const ids = ['not-a-volume-id', 'v1_node-1_00_11', '../../etc/passwd'];
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

  it('waits for a node with no record, says how to end the wait, and ends with the recorded decision', async () => {
    const clients = cluster.csi((await cluster.startController('controller-2')).endpoint);
    const volumeId = `v1_node-never-seen_0123456789abcdef_${'a'.repeat(32)}`;
    const first = deleteVolume(clients, volumeId, 6000);
    await expect(first).rejects.toMatchObject({ code: 10 }); // ABORTED: retriable, the PV stays
    await first.catch((error: Error) => {
      expect(error.message).toContain('node node-never-seen, which is unknown to this driver');
      expect(error.message).toContain('durable-csi nodes forget node-never-seen --reason');
    });
    const client = await cluster.temporal();
    const handle = client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId));
    const running = await handle.describe();
    expect(running.status.name).toBe('RUNNING');
    expect(running.typedSearchAttributes.get(PhaseKey)).toBe('waiting-for-node');

    // Visibility indexes the waiting deletion within moments; forget finds it there.
    let released: string[] = [];
    for (let attempt = 0; attempt < 40 && released.length === 0; attempt++) {
      released = (await forgetNode(client, cluster.driverName, 'node-never-seen', 'never existed')).released;
      if (released.length === 0) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(released).toEqual([deleteWorkflowId(cluster.driverName, volumeId)]);
    expect(await handle.result()).toMatchObject<Partial<DeleteVolumeResult>>({
      outcome: 'node-forgotten',
      reason: 'never existed',
    });
    await expect(deleteVolume(clients, volumeId, 5000)).resolves.toEqual({});
    // A later deletion of another volume of the forgotten node ends with the same recorded decision at once.
    const another = `v1_node-never-seen_0123456789abcdef_${'b'.repeat(32)}`;
    await expect(deleteVolume(clients, another, 5000)).resolves.toEqual({});
    const later = await client.workflow.getHandle(deleteWorkflowId(cluster.driverName, another)).result();
    expect(later).toMatchObject({ outcome: 'node-forgotten', reason: 'never existed' });
  });

  it('refuses to forget a node with neither a record nor pending operations', async () => {
    const client = await cluster.temporal();
    await expect(forgetNode(client, cluster.driverName, 'node-typo', 'oops')).rejects.toThrow(
      'node node-typo has no record and no pending operations',
    );
  });
});
