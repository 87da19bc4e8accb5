import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { Client, WorkflowUpdateFailedError } from '@temporalio/client';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { ControllerExpandVolumeResponse__Output } from '../../csi/generated/csi/v1/ControllerExpandVolumeResponse';
import { buildOrphanReport } from '../../kubernetes/orphan-report';
import { readNodeRecord } from '../../node-records/reads';
import {
  controlTaskQueue,
  deleteWorkflowId,
  nodeRecordWorkflowId,
  forgetNodeRecordUpdate,
  renewRecordSignal,
  NodeIdKey,
  OperationKey,
  PhaseKey,
  VolumeIdKey,
  parseVolumeId,
} from '../../common/names';
import { forgetNode } from '../../operations/forget-node';
import type * as workflows from '../../workflows';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { listPendingOperations } from '../../operations/pending-operations';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

/**
 * `nodes forget` is a decision about a node that is away; these are the paths where the node comes back, or was
 * never away: what was written off is deleted on its disk for real, a re-create makes a new volume, a live node
 * cannot be forgotten, and a deletion that raced the forget still gets the decision.
 */
describe('a forgotten node that comes back, and forgets that race', () => {
  const cluster = new TestCluster('forget-truth');
  afterAll(() => cluster.teardown());

  const keyOf = (volumeId: string) => parseVolumeId(volumeId)!.key;
  const controllers: ManagedProcess[] = [];
  const controller = async (name: string) => {
    const started = await cluster.startController(name);
    controllers.push(started);
    return cluster.csi(started.endpoint);
  };
  /** A deletion as a controller starts it after reading the node's record (not forgotten yet). */
  const startDeletion = async (client: Client, volumeId: string, nodeLive: boolean) => {
    const parts = parseVolumeId(volumeId)!;
    return client.workflow.start<typeof workflows.deleteVolume>('deleteVolume', {
      workflowId: deleteWorkflowId(cluster.driverName, volumeId),
      taskQueue: controlTaskQueue(cluster.driverName),
      args: [{ driverName: cluster.driverName, volumeId, ...parts, nodeLive }],
      typedSearchAttributes: [
        { key: OperationKey, value: 'delete' },
        { key: VolumeIdKey, value: volumeId },
        { key: NodeIdKey, value: parts.nodeId },
        { key: PhaseKey, value: nodeLive ? 'running' : 'waiting-for-node' },
      ],
    });
  };

  it('deletes on its disk every volume written off while it was forgotten, and a re-create makes a new volume', async () => {
    await cluster.startNode('node-1');
    let node2 = await cluster.startNode('node-2');
    const csi = await controller('controller');
    const client = await cluster.temporal();
    const created = await retryLikeCo(() => createVolume(csi, createRequest('pvc-y', undefined, onNode('node-2'))));
    const written = created.volume!.volume_id;
    expect(cluster.volumesOnDisk('node-2')).toEqual([keyOf(written)]);

    await node2.kill('SIGKILL');
    await cluster.untilOffline('node-2');
    await forgetNode(client, cluster.driverName, 'node-2', 'the machine is gone');
    await expect(deleteVolume(csi, written, 8000)).resolves.toEqual({}); // the CO is told it is gone
    expect(cluster.volumesOnDisk('node-2')).toEqual([keyOf(written)]); // nothing could delete it yet

    node2 = await cluster.startNode('node-2'); // the same pool comes back
    await eventually(
      'the written-off volumes deleted on node-2',
      async () => cluster.volumesOnDisk('node-2').length === 0,
      60_000,
    );
    const record = await readNodeRecord(client, cluster.driverName, 'node-2');
    expect(record?.forgotten).toBeUndefined();

    const again = await retryLikeCo(() => createVolume(csi, createRequest('pvc-y', undefined, onNode('node-2'))));
    expect(again.volume!.volume_id).not.toBe(written);
    expect(cluster.volumesOnDisk('node-2')).toEqual([keyOf(again.volume!.volume_id)]);
    await retryLikeCo(() => deleteVolume(csi, again.volume!.volume_id));
    expect(cluster.volumesOnDisk('node-2')).toEqual([]);
  });

  it('answers from its report on: while it deletes what was written off a forget is refused and work waits for the node; a deletion that keeps failing does not keep it out of service', async () => {
    let node7 = await cluster.startNode('node-7');
    const csi = await controller('controller-8');
    const client = await cluster.temporal();
    const created = await Promise.all(
      ['pvc-stuck', 'pvc-kept'].map((name) =>
        retryLikeCo(() => createVolume(csi, createRequest(name, undefined, onNode('node-7')))),
      ),
    );
    const [stuck, kept] = created.map((answer) => answer.volume!.volume_id) as [string, string];
    // Something on the node pins a file of the volume (an immutable attribute): deleting it fails, retryably.
    const pinned = path.join(cluster.pool('node-7'), 'volumes', keyOf(stuck), 'pinned');
    fs.writeFileSync(pinned, 'x');
    execFileSync('chattr', ['+i', pinned]);
    try {
      await node7.stop();
      await cluster.untilOffline('node-7');
      await forgetNode(client, cluster.driverName, 'node-7', 'looked gone');
      await expect(deleteVolume(csi, stuck, 8000)).resolves.toEqual({}); // written off on the record

      node7 = await cluster.startNode('node-7', { waitReady: false });
      // The agent answers: the record is deleting the written-off volume on it.
      await eventually(
        'the deletion reaching node-7',
        () => deletionReachedAgent(client, cluster.driverName, 'node-7'),
        60_000,
      );
      await expect(forgetNode(client, cluster.driverName, 'node-7', 'raced the return')).rejects.toThrow(
        /node node-7 (is live|answers)/,
      );
      // Work on its other volumes waits for it (the node is back, not forgotten), here behind the pool's journal,
      // whose unfinished deletion every pool operation first tries to finish.
      expect(await codeOf(expand(csi, kept, 128 * 1024 * 1024))).toBe('ABORTED');
      // The deletion keeps failing: the node turns live all the same, the write-off still pending and shown.
      await eventually(
        'node-7 live',
        async () => (await readNodeRecord(client, cluster.driverName, 'node-7'))?.node?.live,
        90_000,
      );
      const record = await readNodeRecord(client, cluster.driverName, 'node-7');
      expect(record).toMatchObject({ writtenOff: 1 });
      expect(record?.forgotten).toBeUndefined();
      expect(cluster.volumesOnDisk('node-7')).toContain(keyOf(stuck));
    } finally {
      execFileSync('chattr', ['-i', pinned]);
    }
    // Retried beside the live node: once it can be deleted, it is.
    await eventually(
      'the stuck volume deleted on node-7',
      async () => !cluster.volumesOnDisk('node-7').includes(keyOf(stuck)),
      90_000,
    );
    // The pool's journal may finish the deletion on disk (any pool call settles it) before the record's next round,
    // which comes every 30 s (workflows/written-off-volumes.ts RETRY_EVERY) and clears the write-off once the node
    // answers it: up to a round and its attempts after the volume left the disk (30 s was too tight in a loaded run).
    await eventually(
      'the write-off cleared',
      async () => (await readNodeRecord(client, cluster.driverName, 'node-7'))?.writtenOff === undefined,
      90_000,
    );
    expect(cluster.volumesOnDisk('node-7')).toEqual([keyOf(kept)]);
    await expect(retryLikeCo(() => expand(csi, kept, 128 * 1024 * 1024), 30_000)).resolves.toMatchObject({
      capacity_bytes: String(128 * 1024 * 1024),
    });
  });

  it('the record refuses the forget itself while its node is live, whatever the caller read', async () => {
    const client = await cluster.temporal();
    // What `forgetNode` asks of the record after its own read: the record decides on its own state.
    const notice = { nodeId: 'node-1', reason: 'stale read', at: new Date().toISOString() };
    const handle = client.workflow.getHandle(nodeRecordWorkflowId(cluster.driverName, 'node-1'));
    const refused = await handle.executeUpdate(forgetNodeRecordUpdate, { args: [notice] }).then(
      () => undefined,
      (error: WorkflowUpdateFailedError) => error,
    );
    expect(refused?.cause?.message).toMatch(/node node-1 is live .*stop its agent before forgetting it/);
    expect((await readNodeRecord(client, cluster.driverName, 'node-1'))?.forgotten).toBeUndefined();
  });

  it('with no controller to run the record, a forget is not decided and releases nothing', async () => {
    const csi = await controller('controller-4');
    let node4 = await cluster.startNode('node-4');
    const client = await cluster.temporal();
    const created = await retryLikeCo(() => createVolume(csi, createRequest('pvc-gap', undefined, onNode('node-4'))));
    const volumeId = created.volume!.volume_id;
    await Promise.all(controllers.map((running) => running.stop()));
    // The server times the dead agent's presence out on its own: a read sees node-4 offline, while its record,
    // with no worker to run it, has not decided anything; the agent is back before any controller is.
    await node4.kill('SIGKILL');
    await eventually(
      'node-4 offline to a read (its record cannot run)',
      async () => (await readNodeRecord(client, cluster.driverName, 'node-4'))?.node?.live === false,
      60_000,
    );
    node4 = await cluster.startNode('node-4');
    const deletion = await startDeletion(client, volumeId, false);
    await eventually(
      'a pending operation on node-4',
      async () => (await listPendingOperations(client, cluster.driverName, { nodeId: 'node-4' })).length > 0,
      30_000,
    );
    const started = Date.now();
    await expect(forgetNode(client, cluster.driverName, 'node-4', 'looked dead')).rejects.toThrow(
      /record of node node-4 did not decide .*nothing was released/,
    );
    expect(Date.now() - started).toBeLessThan(30_000);
    await controller('controller-5');
    const result = await deletion.result();
    expect(result).toMatchObject({ outcome: 'deleted' });
    expect((await readNodeRecord(client, cluster.driverName, 'node-4'))?.forgotten).toBeUndefined();
  });

  it('should the record be lost with what was written off, the orphan report still shows those volumes', async () => {
    let node5 = await cluster.startNode('node-5');
    const csi = await controller('controller-6');
    const client = await cluster.temporal();
    const created = await retryLikeCo(() =>
      createVolume(csi, createRequest('pvc-lost-list', undefined, onNode('node-5'))),
    );
    const volumeId = created.volume!.volume_id;
    await node5.kill('SIGKILL');
    await cluster.untilOffline('node-5');
    await forgetNode(client, cluster.driverName, 'node-5', 'gone');
    await expect(deleteVolume(csi, volumeId, 8000)).resolves.toEqual({});
    // An operator clears long-running workflows: the record, and with it the list of what was written off.
    await client.workflow.getHandle(nodeRecordWorkflowId(cluster.driverName, 'node-5')).terminate('test: record lost');
    node5 = await cluster.startNode('node-5');
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(cluster.volumesOnDisk('node-5')).toEqual([keyOf(volumeId)]);
    const report = await buildOrphanReport(client, kubernetesWithoutPvs, cluster.driverName);
    expect(report.unclaimedVolumes.map((volume) => volume.volumeId)).toContain(volumeId);
  });

  it('a deletion that started before the forget was visible gets the decision from a later DeleteVolume', async () => {
    const node3 = await cluster.startNode('node-3');
    const csi = await controller('controller-3');
    const client = await cluster.temporal();
    const created = await retryLikeCo(() => createVolume(csi, createRequest('pvc-race', undefined, onNode('node-3'))));
    const volumeId = created.volume!.volume_id;
    await node3.kill('SIGKILL');
    await cluster.untilOffline('node-3');
    await forgetNode(client, cluster.driverName, 'node-3', 'gone for good');
    // A controller that read the record just before the forget started the deletion without the decision, and
    // the forget's visibility query did not list it yet.
    await startDeletion(client, volumeId, false);
    await expect(deleteVolume(csi, volumeId, 8000)).resolves.toEqual({});
    const result = await client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId)).result();
    expect(result).toMatchObject({ outcome: 'node-forgotten', reason: 'gone for good' });
  });

  it('forgets a node whose record has continued as new (its current run is not the first of its chain)', async () => {
    const node6 = await cluster.startNode('node-6');
    await controller('controller-7');
    const client = await cluster.temporal();
    const record = client.workflow.getHandle(nodeRecordWorkflowId(cluster.driverName, 'node-6'));
    await eventually(
      'node-6 live',
      async () => (await readNodeRecord(client, cluster.driverName, 'node-6'))?.node?.live === true,
      30_000,
    );
    const firstRun = (await record.describe()).runId;
    // Killed, then renewed at once (well within its hold's 20 s heartbeat timeout): the agent dies between two holds,
    // the new run's hold is never started, and the record must turn offline within the agent's presence timeout all
    // the same (the hold's schedule-to-start timeout; it was a fixed minute, which once failed this test by a hair
    // when, under load, the kill landed between the holds by chance).
    const killed = Date.now();
    await node6.kill('SIGKILL');
    await record.signal(renewRecordSignal);
    await eventually('the record renewed', async () => (await record.describe()).runId !== firstRun, 30_000);
    await cluster.untilOffline('node-6', 45_000);
    // The tests' presence timeout is 20 s (TEST_NODE_FLAGS); 40 s leaves room for a loaded machine, not for 1 min.
    expect(Date.now() - killed).toBeLessThan(40_000);
    const outcome = await forgetNode(client, cluster.driverName, 'node-6', 'retired after a renewal');
    expect(outcome.notice).toMatchObject({ nodeId: 'node-6', reason: 'retired after a renewal' });
    expect((await readNodeRecord(client, cluster.driverName, 'node-6'))?.forgotten?.reason).toBe(
      'retired after a renewal',
    );
  });
});

/**
 * The Kubernetes API as the orphan report reads it, after the CO removed the PVs of the written-off volumes: no
 * PV, no claim being provisioned, no VolumeSnapshotContent. (Temporal, the agents and the pools are real.)
 */
const kubernetesWithoutPvs = {
  core: {
    listPersistentVolume: async () => ({ items: [] }),
    listPersistentVolumeClaimForAllNamespaces: async () => ({ items: [] }),
  } as unknown as CoreV1Api,
  custom: { listClusterCustomObject: async () => ({ items: [] }) } as unknown as CustomObjectsApi,
};

/** Whether a deleteVolumeOnNode of the node's record reached the agent (running, or failed there and retried). */
async function deletionReachedAgent(client: Client, driverName: string, nodeId: string): Promise<boolean> {
  const record = client.workflow.getHandle(nodeRecordWorkflowId(driverName, nodeId));
  const pending = (await record.describe()).raw.pendingActivities ?? [];
  return pending.some(
    (activity) =>
      activity.activityType?.name === 'deleteVolumeOnNode' &&
      (activity.state === PENDING_ACTIVITY_STARTED || (activity.attempt ?? 1) > 1 || !!activity.lastFailure),
  );
}

/** pendingActivities[].state of a started activity (temporal.api.enums.v1.PendingActivityState). */
const PENDING_ACTIVITY_STARTED = 2;

function expand(csi: CsiClients, volumeId: string, bytes: number) {
  return call<ControllerExpandVolumeResponse__Output>((done) =>
    csi.controller.ControllerExpandVolume(
      { volume_id: volumeId, capacity_range: { required_bytes: String(bytes) } },
      withDeadline(10_000),
      done,
    ),
  );
}
