import type { Client } from '@temporalio/client';
import type { CsiClients } from '../../csi/client';
import { readNodeRecord } from '../../node-records/reads';
import { TestCluster } from '../support/cluster';
import { createSnapshotUntilReady } from '../support/snapshot-requests';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

/**
 * A restore has one possible node (its snapshot's), and that node's record shows its free space as of the last
 * heartbeat (10 s). Right after a deletion freed the room, the record still counts the deleted volume: placement
 * must ask the pool, not refuse with RESOURCE_EXHAUSTED until the next heartbeat. The test makes sure the record
 * really is behind (it deletes and reads the record again until it catches the record stale) before restoring.
 */
describe('a restore right after a deletion freed its room', () => {
  const cluster = new TestCluster('restoreroom');
  afterAll(() => cluster.teardown());

  const recordedRoom = async (client: Client) =>
    (await readNodeRecord(client, cluster.driverName, 'node-1'))?.node?.availableBytes ?? -1;

  it('is placed on the snapshot node by its pool, though the record still shows the pool full', async () => {
    // 64 MiB source + 64 MiB snapshot + 128 MiB filler fill a 256 MiB pool.
    await cluster.startNode('node-1', { capacity: '256Mi' });
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const client = await cluster.temporal();
    const source = await retryLikeCo(() => createVolume(clients, createRequest('pvc-src', 64 * MiB, onNode('node-1'))));
    const snapshot = await createSnapshotUntilReady(clients, 'snap-1', source.volume!.volume_id);

    let stale = false;
    for (let round = 1; round <= 5 && !stale; round++) {
      const filler = await retryLikeCo(() =>
        createVolume(clients, createRequest(`pvc-filler-${round}`, 128 * MiB, onNode('node-1'))),
      );
      // The record must have seen the pool full, or the deletion below frees nothing it knows of.
      await eventually('the record showing the pool full', async () => (await recordedRoom(client)) < 64 * MiB, 30_000);
      await retryLikeCo(() => deleteVolume(clients, filler.volume!.volume_id));
      stale = (await recordedRoom(client)) < 64 * MiB; // else a heartbeat came in between: go again
    }
    expect(stale).toBe(true);

    expect(await codeOf(restore(clients, 'pvc-restored', snapshot.snapshot!.snapshot_id))).toBe('OK');
  });

  it('is still RESOURCE_EXHAUSTED when the pool itself has no room', async () => {
    await cluster.startNode('node-2', { capacity: '192Mi' });
    const clients = cluster.csi((await cluster.startController('controller-2', ['--snapshots'])).endpoint);
    const source = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-src2', 64 * MiB, onNode('node-2'))),
    );
    const snapshot = await createSnapshotUntilReady(clients, 'snap-2', source.volume!.volume_id);
    await retryLikeCo(() => createVolume(clients, createRequest('pvc-filler2', 64 * MiB, onNode('node-2'))));

    expect(await codeOf(restore(clients, 'pvc-restored2', snapshot.snapshot!.snapshot_id))).toBe('RESOURCE_EXHAUSTED');
  });
});

/** One CreateVolume of 64 MiB from the snapshot, answered as it comes (no retry: the first answer is the point). */
function restore(clients: CsiClients, name: string, snapshotId: string) {
  const source = { volume_content_source: { snapshot: { snapshot_id: snapshotId } } };
  return createVolume(clients, createRequest(name, 64 * MiB, source), 30_000);
}
