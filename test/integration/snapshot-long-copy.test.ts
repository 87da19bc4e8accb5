import fs from 'node:fs';
import path from 'node:path';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import { SLOW_COPY_MS } from '../../agent/failpoints';
import { parseSnapshotId } from '../../common/snapshot-id';
import { TestCluster } from '../support/cluster';
import { createSnapshot, createSnapshotUntilReady } from '../support/snapshot-requests';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

/**
 * A copy longer than a CSI call waits: CreateSnapshot answers the snapshot's ID with ready_to_use false while the
 * copy runs on its node, and the same ID ready once it is done, as the CO polls. A copy waiting for a node that is
 * down is no snapshot yet: ABORTED.
 */
describe('a snapshot whose copy takes longer than a call', () => {
  const cluster = new TestCluster('snaplong');
  afterAll(() => cluster.teardown());

  it('is answered not ready to use while it copies, then ready, under one ID', async () => {
    const plain = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    await plain.stop();
    expect(await codeOf(createSnapshot(clients, 'snap-1', volumeId))).toBe('ABORTED'); // waits for its node

    await cluster.startNode('node-1', { failpoints: 'snapshot.slow-copy' });
    const started = Date.now();
    let copying: CreateSnapshotResponse__Output | undefined;
    for (;;) {
      const answer = await createSnapshot(clients, 'snap-1', volumeId).catch(() => undefined); // ABORTED: not yet
      if (answer?.snapshot && !answer.snapshot.ready_to_use) {
        copying = answer;
        break;
      }
      if (answer?.snapshot) throw new Error(`the copy (${SLOW_COPY_MS} ms longer) ended before an answer saw it`);
      if (Date.now() - started > 60_000) throw new Error('no answer within 60 s saw the copy running');
    }
    expect(copying.snapshot!.source_volume_id).toBe(volumeId);
    const key = parseSnapshotId(copying.snapshot!.snapshot_id)!.key;
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([]);

    const ready = await createSnapshotUntilReady(clients, 'snap-1', volumeId);
    expect(ready.snapshot!.snapshot_id).toBe(copying.snapshot!.snapshot_id);
    expect(Number(ready.snapshot!.size_bytes)).toBe(64 * MiB);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([`${key}.json`]);
  });
});
