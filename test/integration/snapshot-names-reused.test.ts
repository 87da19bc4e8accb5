import type { ServiceError } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import fs from 'node:fs';
import path from 'node:path';
import { FailureType } from '../../common/failures';
import { createSnapshotWorkflowId, deleteSnapshotWorkflowId, parseSnapshotId } from '../../common/names';
import { SnapshotOperations } from '../../operations/snapshot-operations';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { createSnapshot, deleteSnapshot } from '../support/snapshot-requests';

/**
 * A CSI snapshot name used again, as a user did through csc on one dir node (issue 33): after a completed deletion
 * the name makes a new copy under a new ID, whose own deletion removes it; during a deletion that waits for its
 * node the name answers ABORTED, never the doomed ID. Real controller and node agent processes, the real dev server.
 */
describe('CreateSnapshot of a name whose snapshot was deleted', () => {
  const cluster = new TestCluster('snapshot-reuse');
  let clients: ReturnType<TestCluster['csi']>;
  let node: ManagedProcess;
  let sourceId: string;
  /** Snapshot keys in the node's pool, read from disk: the driver's answers are not trusted. */
  const copiesOnDisk = () => {
    const dir = path.join(cluster.pool('node-1'), 'snapshots', 'data');
    return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  };
  const keyOf = (snapshotId: string) => parseSnapshotId(snapshotId)!.key;

  beforeAll(async () => {
    node = await cluster.startNode('node-1');
    clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const source = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-source', 64 * MiB, onNode('node-1'))),
    );
    sourceId = source.volume!.volume_id;
  });
  afterAll(() => cluster.teardown());

  it('after a completed deletion makes a new copy under a new ID, and deleting that ID removes it', async () => {
    const first = (await retryLikeCo(() => createSnapshot(clients, 'snap-s', sourceId))).snapshot!.snapshot_id;
    await retryLikeCo(() => deleteSnapshot(clients, first));
    expect(copiesOnDisk()).toEqual([]);

    const again = (await retryLikeCo(() => createSnapshot(clients, 'snap-s', sourceId))).snapshot!.snapshot_id;
    expect(copiesOnDisk()).toEqual([keyOf(again)]);
    expect(again).not.toBe(first);
    // A late retry of the first deletion answers OK and leaves the new copy alone.
    await retryLikeCo(() => deleteSnapshot(clients, first));
    expect(copiesOnDisk()).toEqual([keyOf(again)]);
    await retryLikeCo(() => deleteSnapshot(clients, again));
    expect(copiesOnDisk()).toEqual([]);
  });

  it('during a deletion waiting for its node answers ABORTED naming it, then makes a new copy', async () => {
    const doomed = (await retryLikeCo(() => createSnapshot(clients, 'snap-t', sourceId))).snapshot!.snapshot_id;
    await node.stop();
    expect(await codeOf(deleteSnapshot(clients, doomed, 5000))).toBe('ABORTED');

    const refused = await createSnapshot(clients, 'snap-t', sourceId, 8000).then(
      (answer) => answer,
      (error: ServiceError) => error,
    );
    expect(refused).toMatchObject({ code: status.ABORTED });
    expect((refused as ServiceError).details).toContain(deleteSnapshotWorkflowId(cluster.driverName, doomed));
    expect((refused as ServiceError).details).toMatch(/snapshot deletion of \S+ has waited \d+s for node node-1/);
    expect(copiesOnDisk()).toEqual([keyOf(doomed)]);

    // The CO keeps retrying both; the create answers once the deletion has ended, with a copy of its own.
    const recreated = retryLikeCo(() => createSnapshot(clients, 'snap-t', sourceId));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    node = await cluster.startNode('node-1');
    await retryLikeCo(() => deleteSnapshot(clients, doomed));
    const second = (await recreated).snapshot!.snapshot_id;
    expect(second).not.toBe(doomed);
    expect(copiesOnDisk()).toEqual([keyOf(second)]);
    await retryLikeCo(() => deleteSnapshot(clients, second));
    expect(copiesOnDisk()).toEqual([]);
  });

  it('refuses a request that arrived before the deletion, or whose caller gave up, and creates nothing', async () => {
    const before = new Date();
    const deleted = (await retryLikeCo(() => createSnapshot(clients, 'snap-u', sourceId))).snapshot!.snapshot_id;
    await retryLikeCo(() => deleteSnapshot(clients, deleted));
    const operations = new SnapshotOperations(await cluster.temporal(), cluster.driverName);
    const run = async () =>
      (await cluster.temporal()).workflow.getHandle(createSnapshotWorkflowId(cluster.driverName, 'snap-u')).describe();
    const runBefore = (await run()).runId;

    const late = operations.create('snap-u', sourceId, 3000, { receivedAt: before, abandoned: () => false });
    await expect(late).rejects.toMatchObject({ type: FailureType.Aborted, message: /was deleted after this request/ });
    const givenUp = operations.create('snap-u', sourceId, 3000, { receivedAt: new Date(), abandoned: () => true });
    await expect(givenUp).rejects.toMatchObject({ type: FailureType.Aborted, message: /the caller gave up/ });
    expect((await run()).runId).toBe(runBefore);
    expect(copiesOnDisk()).toEqual([]);

    // Sent after the deletion by a caller still waiting, the same request makes a new snapshot.
    const fresh = await operations.create('snap-u', sourceId, 10_000, {
      receivedAt: new Date(),
      abandoned: () => false,
    });
    expect(fresh.snapshotId).not.toBe(deleted);
    expect(copiesOnDisk()).toEqual([keyOf(fresh.snapshotId)]);
    await retryLikeCo(() => deleteSnapshot(clients, fresh.snapshotId));
  });
});
