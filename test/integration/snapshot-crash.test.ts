import fs from 'node:fs';
import path from 'node:path';
import { parseSnapshotId } from '../../common/snapshot-id';
import { TestCluster } from '../support/cluster';
import { createSnapshot, createSnapshotUntilReady, notReadyYet } from '../support/snapshot-requests';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

/**
 * A node agent killed after making the copy, before answering: the snapshot waits for that node (ABORTED), and when
 * the agent returns the retried activity finds the copy by its key. One copy, no orphan.
 */
describe('node agent killed after copying a snapshot, before answering', () => {
  const cluster = new TestCluster('snapkill');
  afterAll(() => cluster.teardown());

  it('completes on the same node when it returns, with the one copy', async () => {
    const first = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    await first.stop();
    const doomed = await cluster.startNode('node-1', { failpoints: 'snapshot.after-copy' });

    expect(await notReadyYet(createSnapshot(clients, 'snap-1', volumeId, 5_000))).toBe(true);
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const copies = fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'));
    expect(copies).toHaveLength(1);

    await cluster.startNode('node-1');
    const answer = await createSnapshotUntilReady(clients, 'snap-1', volumeId);
    expect(parseSnapshotId(answer.snapshot!.snapshot_id)?.key).toBe(copies[0]);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'))).toEqual(copies);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'journal'))).toEqual([]);
  });
});
