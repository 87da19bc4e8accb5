import { TestCluster } from '../support/cluster';
import { createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';

/** Invariant 3: one name, called many times concurrently through two controller processes, is one volume. */
describe('CreateVolume idempotency', () => {
  const cluster = new TestCluster('idem');
  afterAll(() => cluster.teardown());

  it('ten concurrent calls through two controllers create exactly one volume', async () => {
    const nodes = ['node-a', 'node-b', 'node-c'];
    await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId)));
    const [first, second] = await Promise.all([cluster.startController('c1'), cluster.startController('c2')]);
    const clients = [cluster.csi(first.endpoint), cluster.csi(second.endpoint)];

    const request = createRequest('pvc-same-name');
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, index) => retryLikeCo(() => createVolume(clients[index % 2]!, request))),
    );
    const ids = new Set(answers.map((answer) => answer.volume?.volume_id));
    expect(ids.size).toBe(1);
    const onDisk = nodes.flatMap((nodeId) => cluster.volumesOnDisk(nodeId));
    expect(onDisk).toHaveLength(1);
    expect([...ids][0]).toContain(onDisk[0]);

    // A later retry (the CO lost the reply) still answers the same volume.
    const again = await createVolume(clients[1]!, request);
    expect(again.volume?.volume_id).toBe([...ids][0]);

    await retryLikeCo(() => deleteVolume(clients[0]!, [...ids][0]!));
    expect(nodes.flatMap((nodeId) => cluster.volumesOnDisk(nodeId))).toEqual([]);

    // The name may be used again once its volume is gone, even with another size: a new volume.
    const reused = await retryLikeCo(() =>
      createVolume(clients[1]!, createRequest('pvc-same-name', 128 * 1024 * 1024)),
    );
    expect(reused.volume?.volume_id).not.toBe([...ids][0]);
    expect(Number(reused.volume?.capacity_bytes)).toBe(128 * 1024 * 1024);
    expect(nodes.flatMap((nodeId) => cluster.volumesOnDisk(nodeId))).toHaveLength(1);
  });
});
