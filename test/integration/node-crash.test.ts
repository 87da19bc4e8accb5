import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, retryLikeCo } from '../support/csi-requests';
import { TOPOLOGY_NODE_KEY } from '../../common/names';

/**
 * Invariant 4: a node agent that dies after allocating but before answering may have allocated; the create
 * must finish on that node, never start again elsewhere, and leave no orphan.
 */
describe('node agent killed after allocating, before answering', () => {
  const cluster = new TestCluster('nodekill');
  afterAll(() => cluster.teardown());

  it('completes on the same node when it returns: no second copy, no orphan', async () => {
    const doomed = await cluster.startNode('node-1', { failpoints: 'create.after-allocate' });
    await cluster.startNode('node-2');
    const clients = cluster.csi((await cluster.startController()).endpoint);
    const preferNode1 = { segments: { [TOPOLOGY_NODE_KEY]: 'node-1' } };
    const request = createRequest('pvc-node-dies', undefined, {
      accessibility_requirements: { preferred: [preferNode1] },
    });

    expect(await codeOf(createVolume(clients, request, 5000))).toBe('ABORTED');
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const allocated = cluster.volumesOnDisk('node-1');
    expect(allocated).toHaveLength(1);

    // Longer than the first try's schedule-to-start timeout: had the workflow moved on, node-2 would have it now.
    await new Promise((resolve) => setTimeout(resolve, 25_000));
    expect(await codeOf(createVolume(clients, request, 3000))).toBe('ABORTED');
    expect(cluster.volumesOnDisk('node-2')).toEqual([]);

    await cluster.startNode('node-1');
    const answer = await retryLikeCo(() => createVolume(clients, request));
    expect(answer.volume!.volume_id.split('_')[3]).toBe(allocated[0]);
    expect(cluster.volumesOnDisk('node-1')).toEqual(allocated);
    expect(cluster.volumesOnDisk('node-2')).toEqual([]);
  });
});
