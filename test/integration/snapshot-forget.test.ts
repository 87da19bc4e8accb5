import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { parseSnapshotId } from '../../common/snapshot-id';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import { TestCluster } from '../support/cluster';
import { createSnapshot, createSnapshotUntilReady, deleteSnapshot, notReadyYet } from '../support/snapshot-requests';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/run-cli';

/**
 * `nodes forget` ends a snapshot operation waiting on the node, and what the CO was then told is gone (a deleted
 * snapshot, a create that may have copied) is written off on the node's record: should the node return with the
 * same pool, the copies are deleted there for real, not left as orphans nobody lists.
 */
describe('snapshots of a forgotten node that comes back', () => {
  const cluster = new TestCluster('snapforget');
  afterAll(() => cluster.teardown());

  const copies = (nodeId: string) => fs.readdirSync(path.join(cluster.pool(nodeId), 'snapshots', 'data'));
  const untilOffline = (client: Client, nodeId: string) =>
    eventually(async () => (await readNodeRecord(client, cluster.driverName, nodeId))?.node?.live === false);

  it('a snapshot deleted while its node was forgotten is deleted on its pool when the node returns', async () => {
    const node = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const client = await cluster.temporal();
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const made = await createSnapshotUntilReady(clients, 'snap-1', volume.volume!.volume_id);
    const key = parseSnapshotId(made.snapshot!.snapshot_id)!.key;
    expect(copies('node-1')).toEqual([key]);

    await node.kill('SIGKILL');
    await untilOffline(client, 'node-1');
    await forgetNode(client, cluster.driverName, 'node-1', 'the machine is gone');
    await expect(deleteSnapshot(clients, made.snapshot!.snapshot_id)).resolves.toEqual({}); // node-forgotten
    expect(copies('node-1')).toEqual([key]); // nothing could delete it yet

    await cluster.startNode('node-1'); // the same pool comes back
    await eventually(() => copies('node-1').length === 0, 60_000, 'the written-off copy deleted');
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([]);
  });

  it('a copy made by a create that the forget ended is deleted on its pool when the node returns', async () => {
    const first = await cluster.startNode('node-2');
    const clients = cluster.csi((await cluster.startController('controller-2', ['--snapshots'])).endpoint);
    const client = await cluster.temporal();
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-2', 64 * MiB, onNode('node-2'))));
    await first.stop();
    // The copy is made and recorded, then the agent dies before answering (test/integration/snapshot-crash.test.ts).
    const doomed = await cluster.startNode('node-2', { failpoints: 'snapshot.after-copy' });
    expect(await notReadyYet(createSnapshot(clients, 'snap-2', volume.volume!.volume_id, 5_000))).toBe(true);
    await doomed.exited;
    expect(copies('node-2')).toHaveLength(1);

    await untilOffline(client, 'node-2');
    await forgetNode(client, cluster.driverName, 'node-2', 'the machine is gone');
    await eventually(
      async () => (await codeOf(createSnapshot(clients, 'snap-2', volume.volume!.volume_id, 5_000))) === 'NOT_FOUND',
      60_000,
      'the create ended by the forget',
    );
    expect(copies('node-2')).toHaveLength(1);

    await cluster.startNode('node-2');
    await eventually(() => copies('node-2').length === 0, 60_000, 'the written-off copy deleted');
  });
});
