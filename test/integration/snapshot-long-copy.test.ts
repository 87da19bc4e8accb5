import fs from 'node:fs';
import path from 'node:path';
import { SLOW_COPY_MS } from '../../agent/failpoints';
import { parseSnapshotId } from '../../common/snapshot-id';
import { TestCluster } from '../support/cluster';
import { createSnapshot, createSnapshotUntilReady } from '../support/snapshot-requests';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

/**
 * A copy longer than a CSI call waits: CreateSnapshot answers ABORTED while it runs (no ID the CO could delete
 * before the copy lands, docs/snapshots.md), then the one recorded copy once it is done.
 */
describe('a snapshot whose copy takes longer than a call', () => {
  const cluster = new TestCluster('snaplong');
  afterAll(() => cluster.teardown());

  it('is ABORTED while it copies, then answered ready with the one copy', async () => {
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    await cluster.startNode('node-1', { failpoints: 'snapshot.slow-copy' });
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    const started = Date.now();
    expect(await codeOf(createSnapshot(clients, 'snap-1', volumeId))).toBe('ABORTED'); // the call waits 3 s
    expect(Date.now() - started).toBeLessThan(SLOW_COPY_MS); // answered while the copy still ran
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([]);

    const ready = await createSnapshotUntilReady(clients, 'snap-1', volumeId);
    expect(Number(ready.snapshot!.size_bytes)).toBe(64 * MiB);
    const key = parseSnapshotId(ready.snapshot!.snapshot_id)!.key;
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([`${key}.json`]);
  });
});
